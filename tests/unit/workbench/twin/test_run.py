"""A whole twin run (the use case `run_twin(TwinRequest)`) against fake servers whose divergences are placed
exactly (see conftest.py)."""

from __future__ import annotations

import json

import pytest

from workbench.errors import WorkbenchError
from workbench.results.verdict import Verdict
from workbench.twin.api import Side, TwinRequest, TwinSettings, run_twin
from workbench.twin.diverge import Outcome

from .conftest import FAR, NEAR


def sides(a, b, batch=(2, 2)):
    return Side.of_url("A", a.url, batch=batch[0]), Side.of_url("B", b.url, batch=batch[1])


def twin(side_a, side_b, prompts, *, out, settings):
    """The use case as the verb and the notebook call it."""
    return run_twin(TwinRequest(side_a, side_b, prompts, out=out, settings=settings), progress=False)


def test_a_near_tie_and_a_real_divergence_are_told_apart(fake_server, prompts, tmp_path):
    a = fake_server(near_positions={3})
    b = fake_server(near_positions={3}, flips={(48, 3), (49, 5)})  # prompt 1 at a near tie, prompt 2 at a far one
    result = twin(*sides(a, b), prompts, out=tmp_path / "run", settings=TwinSettings(max_tokens=8))
    table = result.prompt_table().set_index("prompt")
    assert list(table["outcome"]) == ["identical", "near tie", "diverged", "identical"]
    assert table.loc[1, "position"] == 3 and table.loc[1, "gap"] == pytest.approx(2 * NEAR)
    assert table.loc[2, "position"] == 5 and table.loc[2, "gap"] == pytest.approx(2 * FAR)
    assert table.loc[2, "token_b"] == (table.loc[2, "token_a"] + 1) % 50 and table.loc[2, "id"] == "p2"
    assert result.noise is not None and result.noise.identical == 4  # A against its own repeat
    assert result.verdict.verdict is Verdict.ERROR and "25%" in result.verdict.reasons[0]
    assert result.first_divergence().prompt == 2 and result.first_divergence(near_ties=True).prompt == 1
    saved = json.loads((tmp_path / "run" / "twin.json").read_text())
    assert saved["verdict"]["verdict"] == "error" and saved["provenance"]["url"] == a.url
    assert [p["outcome"] for p in saved["prompts"]] == ["identical", "near tie", "diverged", "identical"]
    assert saved["reproducibility"]["sides"]["B"]["switches"] == "unknown (attached server)"
    # each request carried one batch of two consecutive prompts, greedy, with runners-up as token ids
    body = b.requests[0]
    assert len(body["prompt"]) == 2 and body["temperature"] == 0.0 and body["ignore_eos"]
    assert body["return_tokens_as_token_ids"] and body["logprobs"] == 5 and len(a.requests) == 4  # A twice


def test_drift_without_a_token_change_is_judged(fake_server, prompts, tmp_path):
    a, b = fake_server(), fake_server(drift=-0.05)
    result = twin(*sides(a, b), prompts, out=tmp_path / "run", settings=TwinSettings(max_tokens=4, noise_repeats=0))
    assert result.pair.identical == 4 and result.pair.max_drift == pytest.approx(0.05)
    assert result.verdict.verdict is Verdict.WARNING and result.noise is None


def test_a_killed_run_resumes_where_it_stopped(fake_server, prompts, tmp_path):
    a, b = fake_server(), fake_server()
    b.fail.set()  # B refuses everything: its prompts are logged as failed
    first = twin(*sides(a, b), prompts, out=tmp_path / "run", settings=TwinSettings(max_tokens=4))
    assert first.pair.failed == 4 and first.verdict.verdict is Verdict.ERROR
    assert {r.outcome for r in first.rows} == {Outcome.FAILED}
    sent_a = len(a.requests)
    b.fail.clear()
    second = twin(*sides(a, b), prompts, out=tmp_path / "run", settings=TwinSettings(max_tokens=4))
    assert len(a.requests) == sent_a  # A's logs were complete: its server was not asked again
    assert second.pair.identical == 4 and second.verdict.verdict is Verdict.PASS


def test_a_different_plan_in_the_same_directory_is_refused(fake_server, prompts, tmp_path):
    a, b = fake_server(), fake_server()
    twin(*sides(a, b), prompts, out=tmp_path / "run", settings=TwinSettings(max_tokens=2))
    with pytest.raises(WorkbenchError, match="changed: settings"):
        twin(*sides(a, b), prompts, out=tmp_path / "run", settings=TwinSettings(max_tokens=3))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(WorkbenchError, match="not a twin run"):
        twin(*sides(a, b), prompts, out=tmp_path / "other", settings=TwinSettings(max_tokens=2))


def test_one_server_answers_both_sides_of_a_batch_twin(fake_server, prompts, tmp_path):
    server = fake_server()
    a, b = Side.of_url("A", server.url, batch=1), Side.of_url("B", server.url, batch=4)
    result = twin(a, b, prompts, out=tmp_path / "run", settings=TwinSettings(max_tokens=3))
    assert [len(r["prompt"]) for r in server.requests] == [1, 1, 1, 1, 1, 1, 1, 1, 4]  # A, its repeat, then B
    assert result.pair.identical == 4 and result.verdict.verdict is Verdict.PASS


def test_an_interrupted_run_keeps_what_it_collected_and_sends_only_the_rest(
    fake_server, prompts, tmp_path, monkeypatch
):
    from workbench.twin import collect as collect_module

    a, b = fake_server(), fake_server()
    real_send, sent = collect_module._send, []

    def send_then_interrupt(*args, **kwargs):
        if len(sent) == 3:  # A's two groups, then the first of its repeat: Ctrl-C
            raise KeyboardInterrupt
        sent.append(args[5])  # the group's number
        return real_send(*args, **kwargs)

    monkeypatch.setattr(collect_module, "_send", send_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        twin(*sides(a, b), prompts, out=tmp_path / "run", settings=TwinSettings(max_tokens=3))
    assert (tmp_path / "run" / "plan.json").is_file() and len(
        (tmp_path / "run" / "A.jsonl").read_text().splitlines()
    ) == 4
    monkeypatch.setattr(collect_module, "_send", real_send)
    before = len(a.requests)
    result = twin(*sides(a, b), prompts, out=tmp_path / "run", settings=TwinSettings(max_tokens=3))
    assert len(a.requests) - before == 1  # only the repeat's second group; A's own run was complete
    assert result.noise.prompts == 4 and result.pair.identical == 4
