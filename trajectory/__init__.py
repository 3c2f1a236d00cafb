"""trajectory: what one trajectory is, at the bottom of the layers so that every other package may import it.

A trajectory row (``schema``: the archive's columns and version; ``archive_checks``: the rules a row obeys;
``rows``: the one constructor of a row) and the observation of a tool environment's step (``observation``).
It imports nothing of the project: backends, SWE environments, importers and the controller all build on it.
"""
