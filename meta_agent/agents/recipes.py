"""The recipe table: deterministic rules from digest signals to harness changes.

Each rule (a ``Rule``) reads a few digest fields and ``main``'s files (``HarnessFiles``)
and returns either a ``Change`` (the new file texts, the proposal's hypothesis and its
predicted effects) or a ``str`` saying why it did not fire.  A rule commits nothing:
``meta_agent.agents.recipe.RecipeAgent`` ranks the changes and commits them as branches.

Each change is written for the gate (``meta_agent.gate``): it predicts at least one
benefit it can deliver, offline (a gate metric the backtest measures) or live (a
digest field the next round measures, so the merge is on probation), and no guard it
cannot keep; a harness.yaml it writes passes the domain's task check and the trusted
per-round limits (``meta_agent.cost.RoundLimits``), or the rule does not fire.

    from meta_agent.agents.recipes import RULES, HarnessFiles
    decision = RULES[0](digest, HarnessFiles.read(repo))   # a Change, or why not

A new rule is one function in the module of its kind (``recipe_reward``, ``recipe_batch``,
``recipe_generation``, ``recipe_diagnostics``; the types in ``recipe_types``), one entry in ``RULES``, its
failure mode in ``REMEDIES``, and its case in ``tests/test_recipe_agent.py`` (a test fails without it).
"""

from __future__ import annotations

from meta_agent.agents.recipe_batch import (  # noqa: F401 - the table's names, imported from here by others
    CURRICULUM_ACCURACY_THRESHOLD, CURRICULUM_KNOBS, CURRICULUM_MIN_COUNT, LARGER_GROUPS_MAX, ZERO_VARIANCE_THRESHOLD,
    curriculum_step, dynamic_sampling, larger_groups, loosen_filters)
from meta_agent.agents.recipe_cue import answer_cue  # noqa: F401
from meta_agent.agents.recipe_diagnostics import restore_diagnostic  # noqa: F401
from meta_agent.agents.recipe_example import answer_last, worked_example  # noqa: F401
from meta_agent.agents.recipe_example_format import example_format  # noqa: F401
from meta_agent.agents.recipe_generation import (  # noqa: F401
    IDENTICAL_THRESHOLD, KL_BETA, KL_EPSILON_FACTOR, KL_EPSILON_FLOOR, KL_HELDOUT_DROP, KL_REWARD_RISE,
    LEARNING_RATE_FLOOR, MAX_COMPLETION_CAP, NO_FINAL_ANSWER_THRESHOLD, TRUNCATION_THRESHOLD, cool_sampling,
    final_answer_prompt, kl_clip, lower_learning_rate, truncation, warm_sampling)
from meta_agent.agents.recipe_limits import fit_limit  # noqa: F401
from meta_agent.agents.recipe_markup import strip_markup  # noqa: F401
from meta_agent.agents.recipe_mask import unmask_truncation  # noqa: F401
from meta_agent.agents.recipe_mix import exam_mix  # noqa: F401
from meta_agent.agents.recipe_slice import slice_mix  # noqa: F401
from meta_agent.agents.recipe_question import whole_question  # noqa: F401
from meta_agent.agents.recipe_shown import shown_answer  # noqa: F401
from meta_agent.agents.recipe_reward import (  # noqa: F401
    MISS_RATE_THRESHOLD, boxed_answers, seed_reward, verifier_answers)
from meta_agent.agents.recipe_stall import unstall  # noqa: F401
from meta_agent.agents.recipe_update import resize_update  # noqa: F401
from meta_agent.agents.recipe_types import (  # noqa: F401
    Change, Decision, HarnessFiles, Rule, below_threshold, overshoot)

RECIPES_VERSION = 20
"""The recipe set's version: raise it whenever a rule is added or its decision changes.  The repair benchmark
records it in every result and counts a flaw planted against an older version as in-sample (the recipes may
have been written while looking at it; ``bench/repair_flaws.sample``).  1: the recipe set of 2026-12-06 before issue
44; 2: knob and budget targets from the archive's evidence, either way, and warm-sampling; 3: cool-sampling counts
responses cut past a budget that fits accepted answers as rambling (hot-sampling's round 0 cut 88% at 32 tokens);
4: a knob move a reverted merge made (same knob, same direction) is declined without new evidence
(``refuted``), and the search agent ranks knob and prompt edits by a generation preview; 5: loosen-filters also fires
on ``main:informative_dropped`` (filters that remove the reward contrast of most varying groups, whatever they keep),
and ``refuted`` reads knobs as training does (a quoted or aliased number is the same move); 6: loosen-filters judges
main's filters by their keep mask, the search agent fits a reward change's predictions to its backtest preview and
offers prompt edits aligning the Answer: line with the verifier (``prompt_align``); 7: a harness training refuses
is repaired before the round trains (``fit-limit`` on the trainer's measured ``main:prompt_length``, admitted by
``meta_agent.phases.refused``); 8: ``exam-mix`` on ``main:task_mix`` (main's task weights against the exam's), and the
search agent proposes a recipe's generation-only edit only on preview evidence (``search.lacks_evidence``); 9: a
change of diagnostics alone is no generation edit (``search.family_of``; held-out set 12f's misnamed-finding); 10:
``worked-example`` and ``answer-last`` on main's prompts read as text (``meta_agent.example_checks``; their evidence is
that reading re-run on the branch), ``unstall`` on ``main:policy_stalled``, loosen-filters rewrites filters.py where
drops masking cannot explain remain, and ``main:task_mix`` compares the kinds each name draws (SWE); 11:
``whole-question`` on ``main:question_cut`` (``meta_agent.question_checks``), ``unmask-truncation`` and the search's
knob family over every trainer knob bearing on a mode (``search_knobs``), main's filters and diagnostics run on
constructed batches (``meta_agent.constructed_checks``: loosen-filters on a dropped signal, restore-diagnostic guarding
main's own crashed diagnostic), and the findings ratchet reads a rename to a read name or a repaired crash as no
lowering (12f's misnamed-finding, 12g's four misses); 12: ``answer-cue`` on ``main:answer_cue`` (a prompt leaving the
answer's format to a cue the replies continue, ``meta_agent.cue_checks``; the search offers the cue edit too),
restore-diagnostic calibrates main's own diagnostic to the trusted definition on ``main:diagnostic_disagrees`` (a
harness diagnostic's rate against the digest's on the same batches, ``meta_agent.diagnostic_checks``) and where it went
silent (never the seed's file), ``resize-update`` on ``main:update_too_small``/``main:update_too_large`` (how far one
round moved the policy, ``meta_agent.update_checks``), main's prompt_leak reads each row's question, and
whole-question undoes loops and conditions over the question (12h's three misses); 13: the update check's band widens
with the round's optimizer steps (``update_checks.band_for``: resize-update no longer cuts a healthy rate in a round
of many steps); 14: ``shown-answer`` on ``main:shown_answer`` (values main's prompts show as answers against the golds
the trusted generator draws for main's mix, ``meta_agent.example_shown``), restore-diagnostic on
``main:diagnostic_examples`` (a diagnostic's examples and counts against its mode's rows,
``meta_agent.diagnostic_examples``) and on the one diagnostic whose code names no finding, larger-groups on
``main:step_shape`` (a step's prompts and group size against its flat-group rate, either way), truncation on
``main:budget_over_exam``/``main:budget_cuts_answers`` (the training budget against the exam's), reward recipes predict
only what the sampled groups can show (``agents.recipe_predict``) and verifier-answers answers main's own reward
checks (12i's misses); 15: ``example-format`` on ``main:example_format`` (a worked example or shot whose reply does not
end on a line the verifier reads, ``meta_agent.example_format``: 12j's example-reply-in-prose), and the search agent
proposes a reshape or an exam-fitted budget on its trusted check re-run (``shape_evidence``, ``budget_evidence``)
instead of withholding it for a generation preview that cannot see it; 16: ``slice-mix`` on ``main:dead_slice`` (a kind
of main's mix off the exam that returns no signal, judged on main's lineage pooled and a census of fresh groups where
too thin, ``meta_agent.slice_checks``/``slice_census``: 12j's off-exam-task), example-format ends an example on the
verifier's line in place of an unread label line and asks every instruction for ``Answer: <number>`` (12's
format-mismatch, 12c's words-answer), and the search agent stops a recipe's previewed edit only on harm or no change
(``preview_evidence.vetoes``; the nine's tiny-groups and no-final-instruction), judges a group-size move on the round
and slice-mix on its exact evidence; 17: the reward audit writes right answers with text after the final line and
wrong decimals a numeric shortcut pays (``judge.audit_tail``), main's filters and diagnostics are judged on worked,
formatted answers built from the question's arithmetic (``constructed_checks.worked_answers``), ``strip-markup`` on
``main:chat_markup`` and fit-limit on a kind the trainer drops for length (``meta_agent.markup_checks``), and the
search agent judges strip-markup on its exact evidence (12k's six misses, in-sample); 18: the search agent judges
fit-limit on the finding's measured prompt lengths (``recipe_limits.limit_evidence``), not a preview that applies no
length filter (12k's kind-over-prompt-budget, search arm at set 17); 19: a dead slice is an entry (name, config), its
signal a verified right answer (partial credit is not), tested against solved groups too and over sets of off-exam
kinds, its lineage pool ending at a template edit; the audit deals both sides of a gold to each two-sided shortcut;
worked answers alone in constructed groups (restated, bare); prompt lengths rendered from fresh tasks of each kind by
main's templates; rates outside [0, 1] give the search no group-size evidence; main's diagnostics judged on the
constructed batches of verbose rounds (one session a batch) (eight held-out misses of sets 16-18's checks, in-sample;
12l's first run was at set 18); 20: constructed worked groups on every kind the round trains, and
final-answer-prompt takes out the template's own requests for the value alone (12l's markdown-filter and
number-only-instruction, in-sample)."""

# The digest's failure modes (trusted ones and the seed's diagnostics) and the rules that work on
# them.  A warning or error mode that no branch of the round addresses is reported, never dropped.
REMEDIES: dict[str, tuple[str, ...]] = {
    "reward_hacking": ("verifier-answers", "seed-reward"),
    "reward_misses": ("verifier-answers", "boxed-answers"),
    "format_failures": ("verifier-answers", "boxed-answers", "final-answer-prompt"),
    "no_final_answer": ("final-answer-prompt", "truncation", "cool-sampling", "restore-diagnostic",
                        "unmask-truncation", "example-format"),  # example-format: where main's example is why
    "truncation": ("truncation", "restore-diagnostic", "unmask-truncation"),
    "zero_variance_groups": ("warm-sampling", "dynamic-sampling", "larger-groups", "curriculum-step",
                             "restore-diagnostic"),
    "zero_variance": ("warm-sampling", "dynamic-sampling", "larger-groups", "curriculum-step"),
    "filter_drops": ("loosen-filters",),
    "audit_misses": ("verifier-answers",),
    "audit_hacking": ("verifier-answers",),
    "heldout_regression": ("lower-learning-rate", "kl-clip"),
    # main failing the gate's own checks on its round (meta_agent.main_checks): a reward that pays or spreads
    # among failures, errs or leaves its range is rebuilt to pay what the verifier accepts; filters that keep too
    # little are loosened
    "main:failure_pay_new": ("verifier-answers", "seed-reward"),
    "main:failure_spread": ("verifier-answers",),
    "main:flat_failure_share": ("verifier-answers",),
    "main:execution": ("verifier-answers",),
    "main:reward_validity": ("verifier-answers",),
    "main:kept_share": ("loosen-filters",),
    "main:informative_dropped": ("loosen-filters",),
    "main:probe_failure_pay": ("verifier-answers", "seed-reward"),
    "main:probe_execution": ("verifier-answers",),
    # a limit the trainer enforces, measured against main's rendered prompts (training refused main, or would, or
    # it drops a kind of main's mix for length: markup_checks)
    "main:prompt_length": ("fit-limit",),
    "main:task_mix": ("exam-mix",),
    "main:dead_slice": ("slice-mix", "curriculum-step"),  # a kind whose groups return no signal (slice_checks)
    "main:worked_example": ("worked-example",),  # a wrong example in main's prompts (example_checks)
    "main:policy_stalled": ("unstall",),  # the round left the exam's answers as they were (stall_checks)
    "main:update_too_small": ("resize-update",), "main:update_too_large": ("resize-update",),  # update_checks
    "main:answer_first": ("answer-last",),  # main's prompts ask for the Answer: line before the working
    "main:question_cut": ("whole-question",),  # main's prompts lose part of the task's question (question_checks)
    "main:answer_cue": ("answer-cue",),  # main's prompts leave the answer's format to a cue (cue_checks)
    "main:shown_answer": ("shown-answer",),  # main's examples answer golds the mix produces (example_shown)
    "main:example_format": ("example-format",),  # main's examples end off the verifier's line (example_format)
    "main:constructed_signal_dropped": ("loosen-filters",),  # main's filters on constructed groups (a2)
    "main:diagnostic_crashed": ("restore-diagnostic",),  # main's diagnostics on constructed batches (a2)
    "main:diagnostic_disagrees": ("restore-diagnostic",),  # a diagnostic's rate against the trusted one (a2)
    "main:step_shape": ("larger-groups",),  # a step's prompts and group size against its flat groups (shape_checks)
    "main:budget_over_exam": ("truncation",), "main:budget_cuts_answers": ("truncation",),  # budget_checks
    "main:diagnostic_examples": ("restore-diagnostic",),  # a diagnostic's examples against its mode's rows (a2)
    "main:chat_markup": ("strip-markup",),  # the policy's chat markup in main's templates (markup_checks)
}
NO_SAFE_EDIT: dict[str, str] = {
    "diagnostics:crashed": "the harness's own diagnostics failed; a recipe that rewrote them could only lower the "
                           "digest's findings, which the gate counts as harm: fix the diagnostic by hand or with "
                           "the LLM agent",
    "diagnostics:invalid": "the harness's diagnostics returned malformed findings; the same as diagnostics:crashed",
    "test_edits": "what a patch that edits the tests earns is the trusted grader's decision; the recipe vocabulary "
                  "(reward, filters, prompt, knobs) has no edit that stops it without shaping the gate cannot check",
    "tampered_grades": "a patch that forges its grade already earns verified 0 and status 'tampered' from the trusted "
                       "grader; a reward edit could only add shaping the gate cannot check",
    "main:prompt_render": "main's own prompt templates fail to render; the recipes only append to a template that "
                          "renders: fix the template by hand or with the LLM agent",
    "main:prompt_leak": "main's prompts show the gold answer; which part of a template prints it is not something the "
                        "recipe vocabulary can find: fix it by hand or with the LLM agent",
    "main:probe_render": "main's templates fail to render over the probe's fresh tasks; the recipes only append to a "
                         "template that renders: fix the template by hand or with the LLM agent",
    "main:probe_leak": "main's prompts show the gold answer on the probe's fresh tasks; which part of a template "
                       "prints it is not something the recipe vocabulary can find: fix it by hand or with the LLM "
                       "agent",
}
"""Failure modes the digest can name for which no recipe is safe, with why; the round reports them as such."""


# strip-markup first: every other reading of main's prompt text (a cue, an instruction, an example) reads through the
# markup the trainer wraps again (12k's hand-templated-prompt read '<|im_start|>assistant' as an answer cue); it fires
# only where the policy's special tokens are in main's templates
RULES: tuple[Rule, ...] = (strip_markup, verifier_answers, boxed_answers, dynamic_sampling, truncation,
                           final_answer_prompt,
                           larger_groups, curriculum_step, kl_clip, lower_learning_rate, seed_reward, loosen_filters,
                           cool_sampling, warm_sampling, restore_diagnostic, fit_limit, exam_mix,
                           worked_example, answer_last, unstall, whole_question, unmask_truncation, answer_cue,
                           resize_update, shown_answer, example_format, slice_mix)
