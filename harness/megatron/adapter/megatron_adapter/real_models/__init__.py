"""Real Megatron models built on CPU (issue 17): GPTModel and HybridModel from local layer specs, in
a persistent gloo world of worlds/gloo_worlds.py, their sharded_state_dict flattened to the entry JSON of
docs/state-dict-json.md (the adapter's model_dump op; `interop-harness model dump --target megatron`)."""
