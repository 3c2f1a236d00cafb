"""Benchmark: the extra backtest time the probe session costs per candidate (goal: under 2 s on 2 cores).

The probe (``meta_agent.judge.probe``) starts one more sandboxed harness session per candidate,
renders twice a round's prompts over fresh tasks and scores the whole round (every step) of constructed
answers, verified on the host (code: graded in the domain's grader; SWE: records true by construction);
then main's and the candidate's diagnostics over that round (two more sessions), but only for a branch whose
diagnostics or GRPO knobs differ from main's: a diagnose session sees nothing else of the harness
(``diagnose_sessions.export_diagnostics``), so any other branch cannot change a finding and gets no ratchet.
``backtest_branch`` runs it beside the candidate's own sandbox run (a thread), so what it adds to a
backtest is the overlapped time minus the candidate's run alone.  This times, for the seed harness of
``--domain`` on an archive sample (main's run cached, as for every candidate after a round's first, so
only the candidate's run hides the probe):

- the candidate's run alone, the probe alone, both one after the other (the old order) and both
  overlapped (the current order); extra = overlapped - candidate alone, paired per repeat;
- the probe without its diagnostics sessions, beside the candidate: what a branch that keeps main's
  diagnostics and knobs costs (most branches: reward, filters, prompts, task mix);
- the findings ratchet over the sample's archived rounds (main's findings cached, the candidate's fresh),
  and the probe with its diagnostics sessions plus that ratchet, beside the candidate: what a branch that
  changes ``diagnostics/`` or a GRPO knob costs;
- math only: the probe of a larger round (20 steps x 8 x 8: all of it is scored) and a container start alone.

The math sample is the synthetic archive; code and SWE samples are the probe's own constructed answers
(right, formatted-wrong, unformatted, truncated) to the seed's training tasks, graded as the probe grades
them, archived as one round.  Prints a table; not part of the tests.

    .venv/bin/python bench/bench_probe.py                      # math
    .venv/bin/python bench/bench_probe.py --domain code --repeats 5
    .venv/bin/python bench/bench_probe.py --domain swe
    .venv/bin/python bench/bench_probe.py --domain swe --agent        # agent-mode archive and probe
"""

from __future__ import annotations

import json
import random
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

import records
from domains.code import CodeDomain
from harness_repo.repo import HarnessRepo
from meta_agent.backtest import SampleData, diagnose_rounds, draw_sample, ratchet_rounds, run_harness, sandbox_limits
from meta_agent.config import BacktestSettings
from meta_agent.judge.probe import KINDS, ProbeContext, probe_commit
from meta_agent.judge.probe_answers import AGENT_ANSWER_MAKERS, ANSWER_MAKERS
from meta_agent.names import get_domain
from rl_backend.archive import Archive
from rl_backend.synthetic import synthetic_math_rows
from sandboxes.docker import DockerSandbox
from trajectory.rows import trajectory_row

GROUPS = 16


def _timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def constructed_rows(domain, config, n_groups: int, seed: int = 3, agent: bool = False) -> list[dict]:
    """One archived round of ``n_groups`` groups of the probe's four constructed answers to the seed's tasks
    (``agent``: agent-mode episodes, named as ``swe_env.agent_loop`` names them)."""
    tasks = domain.tasks("train", config.tasks, n_groups, seed)
    makers = AGENT_ANSWER_MAKERS if agent else ANSWER_MAKERS
    answers = makers[domain.name](tasks, random.Random(seed), config.grpo.max_completion_length, domain)
    rows = []
    for g, (task, made) in enumerate(zip(tasks, answers)):
        for k, kind in enumerate(KINDS):
            answer = made[kind]
            score, info = answer.verdict or domain.verify(task.data_source, answer.response, task.ground_truth)
            prompt = answer.prompt or task.question
            rows.append(trajectory_row(
                traj_id=f"b-r0-train-agent-{g * len(KINDS) + k}" if agent else f"b-r0-g{g}-s{k}", run_id="b",
                round=0, step=0, group_id=f"train-agent-g{g}" if agent else f"g{g}", sample_idx=k,
                domain=domain.name, task_id=task.task_id, data_source=task.data_source, split="train",
                prompt=prompt, response=answer.response,
                messages=[{"role": "user", "content": prompt}, {"role": "assistant", "content": answer.response}],
                ground_truth=task.ground_truth, verified=float(score), verifier_info=json.dumps(info, default=str),
                response_tokens=len(answer.response) // 4, truncated=answer.truncated,
                finish_reason=answer.finish_reason or ("length" if answer.truncated else "stop"),
                harness_commit="constructed", policy_ref="constructed",
                task=None if agent else {"question": task.question, "vars": task.template_vars()}))
    return rows


def main() -> None:
    parser = records.parser("bench_probe", __doc__)
    parser.add_argument("--domain", choices=sorted(ANSWER_MAKERS), default="math")
    parser.add_argument("--repeats", type=records.positive, default=5)
    parser.add_argument("--agent", action="store_true",
                        help="swe: an agent-mode archive (--backend endpoint), so the probe runs agent episodes")
    args = parser.parse_args()
    load_before = records.load_now()
    sandbox = DockerSandbox()
    settings = BacktestSettings(sample_groups=GROUPS)
    limits = sandbox_limits(settings)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-probe-") as tmp:
        repo = HarnessRepo.create(Path(tmp) / "harness", args.domain)
        seed_commit = repo.head("main")
        cfg = repo.config(seed_commit)
        domain = CodeDomain(sandbox=sandbox) if args.domain == "code" else get_domain(args.domain)
        archive = Archive(Path(tmp) / "archive")
        archive.append_round("b", 0, synthetic_math_rows("b", 0, GROUPS, 4, seed=3, verify=domain.verify)
                             if args.domain == "math" else constructed_rows(domain, cfg, GROUPS, agent=args.agent))
        sample = SampleData.of(draw_sample(archive, settings, n_groups=GROUPS))
        context = ProbeContext.of(sample.rows)
        cache = Path(tmp) / "cache"

        def candidate() -> None:
            run_harness(repo, seed_commit, sample, sandbox, cache, settings, domain.reward_range, fresh=True)

        def probe(commit: str = seed_commit, config=cfg, main_commit: str | None = seed_commit) -> None:
            report = probe_commit(repo, commit, sandbox, limits, settings.timeout_s, domain, config, context,
                                  main_commit=main_commit)
            failed = [c["name"] for c in report.checks if not c["passed"]]
            # the seed passes its own probe (the larger round's 3-digit products may show their own answer)
            assert commit != seed_commit or not failed, f"the seed failed its own probe: {failed}"

        def serial() -> None:
            probe()
            candidate()

        def overlapped(probe_fn=probe) -> None:
            with ThreadPoolExecutor(max_workers=1) as pool:
                pending = pool.submit(probe_fn)
                candidate()
                pending.result()

        knobs = cfg.grpo
        shape = f"{knobs.steps_per_round} steps x {knobs.prompts_per_step} x {knobs.group_size}"
        alone = _timed(candidate, args.repeats)
        mode = f"{args.domain}{' agent' if context.agent else ''}"
        rows.append((f"{mode}: candidate's run alone ({len(sample.rows)} rows)", alone))
        rows.append((f"{mode}: probe alone (seed knobs: {shape})", _timed(probe, args.repeats)))
        rows.append((f"{mode}: probe, then candidate (old order)", _timed(serial, args.repeats)))
        both = _timed(overlapped, args.repeats)
        rows.append((f"{mode}: probe beside candidate (backtest_branch)", both))
        extras = [("extra per candidate (beside - alone, paired)", [b - a for a, b in zip(alone, both)])]
        bare = _timed(lambda: overlapped(lambda: probe(main_commit=None)), args.repeats)
        rows.append((f"{mode}: probe without diagnostics sessions beside candidate", bare))
        extras.append(("extra, main's diagnostics+knobs (most branches; paired)", [b - a for a, b in zip(alone, bare)]))
        rounds = ratchet_rounds(sample)
        diagnose_rounds(repo, seed_commit, seed_commit, archive, rounds, sandbox, settings, cache)  # main's, cached
        ratchet = _timed(lambda: diagnose_rounds(repo, seed_commit, seed_commit, archive, rounds, sandbox, settings,
                                                 cache, fresh=True), args.repeats)
        extras.append((f"findings ratchet alone, {len(rounds)} archived round(s)", ratchet))

        def all_beside() -> None:  # a branch that changes diagnostics: the probe and the ratchet beside its run
            with ThreadPoolExecutor(max_workers=2) as pool:
                pending = [pool.submit(probe), pool.submit(diagnose_rounds, repo, seed_commit, seed_commit, archive,
                                                           rounds, sandbox, settings, cache, True)]
                candidate()
                [p.result() for p in pending]

        every = _timed(all_beside, args.repeats)
        rows.append((f"{mode}: probe + findings ratchet beside candidate", every))
        extras.append(("extra, diagnostics or knobs changed (paired)", [b - a for a, b in zip(alone, every)]))
        if args.domain == "math":
            big = _big_round(repo, Path(tmp))
            rows.append(("probe alone, 20 steps x 8 x 8 (the whole round)",
                         _timed(lambda: probe(big, repo.config(big)), args.repeats)))
            out = Path(tmp) / "out"
            rows.append(("container start + exit only",
                         _timed(lambda: sandbox.run(["true"], mounts=[], output_dir=out, limits=limits), args.repeats)))
    print(f"{'timing':60s} {'median s':>9s} {'max s':>7s}")
    for label, times in rows + extras:
        print(f"{label:60s} {statistics.median(times):9.2f} {max(times):7.2f}")
    records.write(args, {"domain": args.domain, "repeats": args.repeats, "agent": args.agent},
                  {label: {"median_s": round(statistics.median(t), 3), "max_s": round(max(t), 3)}
                   for label, t in rows + extras}, load_before)


def _big_round(repo: HarnessRepo, tmp: Path) -> str:
    """A branch with a round of 20 steps x 8 prompts x 8 answers (math)."""
    wt = repo.start_intervention(0, "big-round", worktree_root=tmp / "wt")
    config = yaml.safe_load((wt.path / "harness.yaml").read_text())
    config["grpo"].update(steps_per_round=20, prompts_per_step=8, group_size=8)
    for spec in config["tasks"]:  # 1-digit generators hold too few distinct questions for 320 tasks
        spec["config"].update(max_digits=3)
    (wt.path / "harness.yaml").write_text(yaml.safe_dump(config))
    repo.commit(wt, "bench: a larger round", {"Hypothesis": "bench"})
    repo.remove_worktree(wt)
    return repo.head(wt.branch)


if __name__ == "__main__":
    main()
