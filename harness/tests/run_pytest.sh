#!/usr/bin/env bash
# Runs pytest with the first python3 here that has it (ci/install-deps.sh installs python3-pytest): the harness's
# test scripts (harness/tests/*_test.py) as ctest declares them, e.g. run_pytest.sh token_damage_test.py --cli BIN.
for py in python3 /usr/bin/python3; do
  if "$py" -c 'import pytest' 2>/dev/null; then exec "$py" -m pytest "$@"; fi
done
echo "no python3 with pytest here (ci/install-deps.sh installs python3-pytest)" >&2
exit 1
