"""The record phase: what the loop reports once a round is done (``Events.round_done``)."""

from __future__ import annotations

import json

from meta_agent.phases.parts import RoundParts


class RecordPhase(RoundParts):
    def summary(self, n: int, info: dict) -> dict:
        rdir = self.run.round_dir(n)
        digest = json.loads((rdir / "digest.json").read_text()) if (rdir / "digest.json").exists() else {}
        return {"round": n, "digest": digest, "interventions": info.get("interventions", []),
                "main": info.get("main_after"), "eval": info.get("eval", {}), "round_dir": str(rdir)}
