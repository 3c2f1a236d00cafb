"""Reviewing a run: show, reports and history views."""
