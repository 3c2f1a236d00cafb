"""rl_backend: training backends behind one protocol, and the trajectory archive they write.

``local`` trains with TRL's GRPOTrainer on CPU; ``verl`` launches verl jobs on GPUs.
Backends never decide what is merged; they train the harness they are given.
"""
