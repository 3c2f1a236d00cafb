"""Judging a harness: backtests, the gate, probes, live checks, tripwires."""
