"""One round of the loop, phase by phase: each module holds what one phase does.

``parts`` holds what every phase works with (the run's parts, progress callbacks, the round's seeds);
``train`` trains and evaluates, ``diagnose`` runs the harness's diagnostics and probes main, ``digest``
summarises the round, ``live`` checks earlier merges and the tripwire against it, ``propose`` asks the agent,
``gate`` backtests the proposals (merging what passes) and ``record`` reports the round.
``meta_agent.loop`` drives them in order, saving the state between phases, and resumes a killed run.
"""
