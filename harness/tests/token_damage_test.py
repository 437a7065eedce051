#!/usr/bin/env python3
"""Tokens that cannot lie: every pinned token in corpus/ (regressions/*.pin, findings/*.finding), in
its ih2 form and in the ih1 form it had before the checksum, with single-character edits (a
substitution by neighbouring characters, a deletion, a truncation) is refused with exit 2 and
"damaged token", or replays the original verdict; never another case, never an abort. A trailing
CR or whitespace is tolerated; `repro --megatron-path` is checked where it needs no Megatron.

Usage: run_pytest.sh token_damage_test.py --cli INTEROP_HARNESS --corpus CORPUS_DIR [--megatron-path SNAPSHOT]
With --megatron-path (label megatron-checkout), only a Megatron token is replayed against that checkout and
against a path hint that is not there, and the version/revision lines are checked."""
import concurrent.futures
import glob
import os
import re
import string
import zlib

import pytest

PLAIN = set(string.ascii_letters + string.digits + "._/+-")


def sign(body):
    """An ih2 text with its checksum: CRC-32 (zlib's) of the text before ':crc='."""
    return body + ":crc=%08x" % zlib.crc32(body.encode())


def encode(value):
    return "".join(c if c in PLAIN else "".join("%%%02X" % b for b in c.encode()) for c in value)


def token(check_name, options):
    return sign("ih2:" + encode(check_name) + "".join(f":{k}={encode(v)}" for k, v in sorted(options.items())))


def body_of(text):
    """The text a token's checksum covers."""
    return text[:text.rindex(":crc=")] if ":crc=" in text else text


def legacy_form(text):
    """The ih1 text a pinned ih2 token had before the checksum (an ih1 token is its own)."""
    return "ih1:" + body_of(text)[len("ih2:"):] if text.startswith("ih2:") else text


def neighbours(c):
    out = {chr(o) for o in (ord(c) - 1, ord(c) + 1) if 33 <= o <= 126}
    if c.isalpha():
        out.add(c.swapcase())
    return sorted(out - {c})


def single_character_edits(text, every_neighbour=False):
    """At every position: a substitution by a neighbouring character (each neighbour when asked,
    else one, alternating below and above), a deletion; a truncation at every third position and
    in the checksum. About 2.4 edits a character keeps the test near 30 s on two busy cores; the
    seam unit test (NoSingleCharacterEditOfATokenParses) tries all 95 printable substitutions."""
    edits = set()
    for i, c in enumerate(text):
        options = neighbours(c)
        for n in options if every_neighbour else options[i % len(options):][:1]:
            edits.add(text[:i] + n + text[i + 1:])
        edits.add(text[:i] + text[i + 1:])
        if i % 3 == 0 or i >= len(text) - 9:
            edits.add(text[:i])
    edits.discard(text)
    return sorted(edits)


def verdict(result):
    """What a replay concluded: its exit code and its case/result lines (the case it ran)."""
    lines = [line for line in result.stdout.splitlines() if line.startswith(("property:", "case:", "result:", "  "))]
    return result.returncode, "\n".join(lines)


def replay_all(run, texts):
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(texts, pool.map(lambda t: run("repro", t, timeout=120), texts)))


# --megatron-path overrides the path a token names (a path hint), for megatron tokens only.
LAYER_MAP = token("gate/pinned-layer-maps/'M*-M*-'",
                  {"target": "megatron", "megatron-path": "/nowhere/Megatron-LM", "megatron-version": "0.0.1",
                   "megatron-revision": "0000000000000000000000000000000000000000"})


@pytest.fixture(scope="module")
def snapshot(pytestconfig):
    return pytestconfig.getoption("--megatron-path")


@pytest.fixture(scope="module")
def damage(snapshot):
    """The damage checks run without --megatron-path (that run replays a Megatron token only)."""
    if snapshot:
        pytest.skip("with --megatron-path only the Megatron token's replay is checked")


@pytest.fixture(scope="module")
def pinned(corpus):
    tokens = []
    for path in sorted(glob.glob(os.path.join(corpus, "regressions", "*.pin")) +
                       glob.glob(os.path.join(corpus, "findings", "*.finding"))):
        for line in open(path).read().splitlines():
            if line.startswith("token: "):
                tokens.append(line[len("token: "):])
    return tokens


@pytest.fixture(scope="module")
def reference(pinned):
    return [t for t in pinned if ":target=reference" in t]


@pytest.fixture(scope="module")
def originals(damage, run, reference):
    """The original verdicts of the pinned reference tokens (a Megatron token is not replayed here, so any edit
    of one that is not refused is a failure)."""
    return {t: verdict(r) for t, r in replay_all(run, reference).items()}


def test_corpus_pins_carry_checksummed_tokens(pinned):
    assert len(pinned) >= 10
    assert all(t.startswith("ih2:") and re.search(r":crc=[0-9a-f]{8}$", t) for t in pinned), \
        [t for t in pinned if not t.startswith("ih2:")][:2]


def test_every_pinned_reference_token_replays(originals):
    assert all(v[0] in (0, 1) for v in originals.values()), {t: v[0] for t, v in originals.items() if v[0] not in (0, 1)}


def test_the_ih1_form_of_every_pinned_reference_token_replays_the_same_verdict(run, reference, originals):
    results = replay_all(run, [legacy_form(t) for t in reference])
    assert [t for t in reference if verdict(results[legacy_form(t)]) != originals[t]] == []


def test_no_single_character_edit_of_a_pinned_token_replays_another_case_or_aborts(run, pinned, originals):
    edited = {}
    for original in pinned:
        for form in sorted({original, legacy_form(original)}):
            for text in single_character_edits(form, every_neighbour=":rc=" in form):
                edited.setdefault(text, original)
    others = []
    for text, result in replay_all(run, sorted(edited)).items():
        refused = result.returncode == 2 and "ERROR: invalid_argument: damaged token" in result.stderr
        if not refused and verdict(result) != originals.get(edited[text]):
            others.append(f"{text!r}: exit {result.returncode} {(result.stdout + result.stderr)[-160:]!r}")
    print(f"INFO: {len(edited)} edits of {len(pinned)} pinned tokens (ih2 and ih1 forms)")
    assert others == [], "\n  ".join(others[:10])


def test_resigned_rc_edits_never_abort_and_an_unusable_one_is_named(run, pinned, damage):
    """A checksum anyone can compute: re-signed edits of a property token's rc= value never abort (RapidCheck
    asserts on a reproduce string it did not write; the harness checks it first)."""
    body = body_of(next(t for t in pinned if ":rc=" in t))
    rc_at = body.index(":rc=") + len(":rc=")
    rc_end = body.index(":", rc_at)
    resigned = [sign(body[:i] + n + body[i + 1:]) for i in range(rc_at, rc_end) for n in neighbours(body[i])[:1] + [""]]
    resigned += [sign(body[:i] + body[rc_end:]) for i in range(rc_at, rc_end)]  # truncated rc=
    results = replay_all(run, sorted(set(resigned)))
    assert [(t, r.returncode, r.stderr[-200:]) for t, r in results.items() if r.returncode not in (0, 1, 2)] == []
    assert any(r.returncode == 2 and "rc= is not a RapidCheck case" in r.stderr for r in results.values())


def test_an_unknown_spec_case_is_exit_2_naming_the_propertys_cases(run, pinned, damage):
    spec_token = next(t for t in pinned if ":spec=" in t and ":target=reference" in t)
    result = run("repro", sign(re.sub(r":spec=[^:]+", ":spec=no_such_case", body_of(spec_token))), timeout=120)
    assert result.returncode == 2 and "no spec case 'no_such_case'" in result.stderr, result.stderr[-300:]


@pytest.mark.parametrize("suffix", ["\r", " ", "\r\n", "\t  "])
def test_a_pasted_token_with_trailing_whitespace_replays_the_same_verdict(run, reference, originals, suffix):
    pasted = {t + suffix: t for t in reference}
    pasted.update({legacy_form(t) + suffix: t for t in reference[:2]})
    replayed = replay_all(run, sorted(pasted))
    assert [t for t, r in replayed.items() if verdict(r) != originals[pasted[t]]] == []


def test_an_ih1_token_that_is_not_pinned_is_a_damaged_token(run, damage):
    """An unpinned ih1 token names no case the harness can vouch for."""
    result = run("repro", "ih1:property/gtp_pieces_tile_chunks:spec=review_tp2:target=reference", timeout=120)
    assert result.returncode == 2 and "damaged token" in result.stderr, result.stderr[-300:]


def test_megatron_path_is_for_megatron_tokens_and_must_be_a_checkout(run, reference, corpus, damage):
    result = run("repro", reference[0], "--megatron-path", corpus, timeout=120)
    assert result.returncode == 2 and "target megatron only" in result.stderr, result.stderr[-300:]
    result = run("repro", LAYER_MAP, "--megatron-path", os.path.join(corpus, "no-such-checkout"), timeout=120)
    assert result.returncode == 2 and "no-such-checkout" in result.stderr, result.stderr[-300:]


def test_repro_with_megatron_path_replays_against_that_checkout(run, snapshot):
    if not snapshot:
        pytest.skip("needs --megatron-path (ctest megatron_checkout_token_path)")
    result = run("repro", LAYER_MAP, "--megatron-path", snapshot, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode in (0, 1) and "at " + os.path.normpath(os.path.abspath(snapshot)) in result.stdout, out[-500:]
    assert "WARNING: the token was printed against megatron-core 0.0.1 (revision 0000000000" in result.stdout, \
        "a replay against another Megatron than the token names says so: " + result.stdout[-500:]
    result = run("repro", LAYER_MAP, timeout=300)
    assert "NOTE: the token's megatron-path /nowhere/Megatron-LM is no Megatron-LM checkout here" in result.stdout, \
        "a path hint that is not here is a NOTE, not a silent switch: " + (result.stdout + result.stderr)[-500:]
