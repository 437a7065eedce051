"""One rank of a round-trip world (roundtrip_world.py, docs/roundtrip.md): the plan it reads (plan), its own
record of where it is (rank), the states it builds from Megatron's code (states), its save and its load (save,
load), the checkpoint files it checks and writes (checkpoint_files), and how a failure is told apart (failures)."""
