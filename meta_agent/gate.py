"""The gate's statistical decision moved to ``meta_agent.judge.gate``, beside everything else the gate decides
(``meta_agent.judge.decision``); its names stay importable here."""

from meta_agent.judge.gate import (FLAT_HARMS, GATE_METRICS, HARMS, LIVE_METRICS, NOT_ENOUGH, Arm, EffectCheck,
                                   GateResult, MetricResult, Sample, check_effects, decide, insufficient, parse_effect)

__all__ = ["Arm", "EffectCheck", "FLAT_HARMS", "GATE_METRICS", "GateResult", "HARMS", "LIVE_METRICS", "MetricResult",
           "NOT_ENOUGH", "Sample", "check_effects", "decide", "insufficient", "parse_effect"]
