"""The verl backend: GRPO rounds on GPUs with verl 0.9.1, the harness running only in the sandboxed runtime.

Modules (importing this package pulls in nothing heavy; ``ingest`` needs no verl at all):

- ``config``       one round's ``verl.trainer.main_ppo`` overrides from harness.yaml knobs and launch options
- ``validate``     compose them with verl's Hydra config, run verl's validators and the checks verl lacks
- ``reward_entry`` the trusted ``compute_score`` verl calls: harness reward via the sandbox, verifier beside it
- ``sampler``      verl's replay buffer judging whole groups through the harness, dropping what it does not keep
                   (``packing``: its score requests, which the gate's verl-shaped probe replays)
- ``ingest``       rollout and validation dumps -> the trajectory archive, streaming, verl's rules applied
                   (``dump_lines``: a dump's lines read with verl's rules; ``columnar``: an ordinary step file
                   parsed as columns at once)
- ``dropped``      the trajectories the sampler dropped (``keep: false``) beside the dump's, so every one judged
                   is archived
- ``backend``      ``VerlBackend``: validate, launch, monitor, resume, ingest, policy carried over, with
                   ``round_data`` (the datasets), ``jobs`` (a launched job's state, log, failure), ``handoff``
                   (the round folder's commit; the previous round's optimizer state carried), ``dry_run``,
                   ``preflight`` (model folder, cluster, exam host) and ``exam`` (the held-out exam)
- ``agent_loop``   the SWE agent loop: agent mode's conversation, tokenised with the chat template

Runbook (one node, 8 GPUs; every node needs this project installed with ``pip install .[verl]``
plus a rollout engine, Docker with the sandbox image, and the run folder at the same path)::

    python -m meta_agent --domain math --backend verl --gpus 8 --dry-run   # command, overrides, validation
    python -m meta_agent --domain math --backend verl --gpus 8             # train
    python -m meta_agent --backend verl --gpus 8 --nodes 2 --ray-address ray://head:10001     # join a cluster
    python -m meta_agent --backend verl --gpus 8 --nodes 2 --ray-job-address http://head:8265 # ray job submit
"""
