"""The value out of sight (issue 46, graders III, helper d, session 37): readings that name the real copy by the value
it shows, read where the copies show no value.

Every reading still winning against the twins compares something a copy shows (an exception name, a type, a literal,
the line around it) with a prior, the file or the old file.  If every copy, the real one included, read the value
where the copies differ through a name drawn per grade (``execution.twin_bindings``), the copies' source would differ
only in names drawn alike.  Measured here on the session's shared draws with the binding lines cut
(``bare_cases``): what a reader sees of a file whose bindings the runners made, none written in it.  The same readings
on the files as laid (binding lines in them, resolved by a reader: ``cases``) are measured by their own modules.
"""

from __future__ import annotations

import pytest

from tests import (test_swe_twins_heldout2 as set2, test_swe_twins_heldout3 as set3, test_swe_twins_heldout4 as set4,
                   test_swe_twins_heldout5 as set5, test_swe_twins_heldout6 as set6, test_swe_twins_heldout7 as set7,
                   test_swe_twins_heldout8 as set8, test_swe_twins_pairs as pairs)
from tests.twin_draws import bare_cases, wins_per_test

WINNING = {**{n: set2.ALL[n] for n in set2.WINS_PER_TEST}, **{n: set3.HELD_OUT[n] for n in set3.WINS},
           **{n: {**set4.HELD_OUT, **set4.BUILT_WITH}[n] for n in set4.WINS},
           **{n: m.HELD_OUT[n] for m in (set5, set6, set7, set8) for n in m.WINS},
           "operator_prior": pairs.operator_prior}
"""Every reading that wins on the laid-in files at 6dd0e65 (strict xfails in their own modules)."""

WINS = {n: "wins on the laid-in files, whose copies show their values (before the bindings)" for n in WINNING}


@pytest.fixture(scope="module")
def bare():
    return bare_cases()


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=f"attack: {WINS[n]}"))
                                  if n in WINS else n for n in sorted(WINNING)])
def test_with_the_values_out_of_sight_no_reading_names_the_real_copy_of_a_test_in_most_of_its_draws(name, bare):
    assert wins_per_test(WINNING[name], bare) == []
