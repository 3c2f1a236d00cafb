"""The views' column encoding on the wire (``harness_client.encode_views``) decodes to the views sent.

A ``same`` reference saves repeating a column equal to an earlier one; it must name only a column the
runtime's decoder holds by then.  A run in the code domain broke that: a column inside ``extra_info`` equal
to the top-level ``reward`` column, which comes after ``extra_info``, was sent as a reference the decoder
could not resolve, so every diagnose request failed with ``KeyError: 'reward'``.
"""

from __future__ import annotations

from sandboxes.harness_client import encode_views
from sandboxes.harness_runtime import decode_columns


def _views_back(views: list[dict]) -> list[dict]:
    columns = decode_columns(encode_views(views))
    return [dict(zip(columns, values)) for values in zip(*columns.values())]


def test_a_nested_column_equal_to_a_later_top_level_column_decodes():
    views = [{"traj_id": f"t{i}", "extra_info": {"score": float(i % 2), "tests": i}, "reward": float(i % 2)}
             for i in range(6)]
    assert _views_back(views) == views


def test_a_nested_name_shared_with_an_outer_column_resolves_to_the_right_one():
    # inner 'reward' equals outer 'score'; inner 'copy' equals the inner 'reward' (not the outer one)
    views = [{"reward": 0.5, "score": float(i), "info": {"reward": float(i), "copy": float(i), "flag": 0.5}}
             for i in range(5)]
    assert _views_back(views) == views
    encoded = encode_views(views)
    assert encoded["info"]["dicts"]["copy"] == {"same": "reward"}  # the inner one: the decoder's lookup agrees
    assert encoded["info"]["dicts"]["reward"] == {"same": "score"}
    assert encoded["info"]["dicts"]["flag"] == {"runs": [[0.5, 5]]}  # the outer 'reward' it equals is shadowed


def test_the_collector_pause_nests_across_threads_and_restores_what_was():
    """Encoding pauses the cyclic collector; a pause that ends while another thread's still runs must not turn
    it back on under that thread, and a collector the caller had turned off stays off."""
    import gc
    import threading

    from sandboxes.harness_wire import collector_paused

    assert gc.isenabled()
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with collector_paused():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    with collector_paused():
        thread.start()
        assert inside.wait(10)
    assert not gc.isenabled()  # the other thread's pause is still on
    release.set()
    thread.join(10)
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
