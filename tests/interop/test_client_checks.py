"""Unit tests of the client-check verdicts (run: .venv-modern/bin/python -m unittest test_client_checks)."""

from __future__ import annotations

import asyncio
import unittest

from mcp import types
from mcp.shared.exceptions import MCPError

from client_checks import (
    CHECKS,
    REFUSALS,
    Check,
    Question,
    Recorder,
    describe_failure,
    match_logs,
    match_questions,
    refusal_problem,
    select,
)


class RecorderTest(unittest.TestCase):
    def test_form_answer_fills_required_fields_from_the_token(self) -> None:
        recorder = Recorder(token="t0")
        schema = {
            "properties": {"name": {"type": "string"}, "check": {"type": "boolean"}, "age": {"type": "integer"}},
            "required": ["name", "check"],
        }
        self.assertEqual(recorder.form_answer(schema), {"name": "name-t0", "check": True})

    def test_form_answer_fills_every_field_when_none_is_required(self) -> None:
        schema = {"properties": {"colour": {"type": "string", "enum": ["red", "blue"]}, "n": {"type": "number"}}}
        self.assertEqual(Recorder(token="t").form_answer(schema), {"colour": "red", "n": 42})

    def test_callbacks_record_kind_and_round_and_answer_with_the_token(self) -> None:
        recorder = Recorder(token="t1")
        recorder.note_request(b'{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{}}')
        message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi"))
        params = types.CreateMessageRequestParams(messages=[message], max_tokens=5)
        sampled = asyncio.run(recorder.on_sample(None, params))
        roots = asyncio.run(recorder.on_roots(None))
        self.assertEqual(sampled.content.text, "sampled-t1")
        self.assertEqual(str(roots.roots[0].uri), "file:///interop/t1")
        self.assertEqual([(q.kind, q.round) for q in recorder.questions], [("sample", 1), ("roots", 1)])
        self.assertIn('"hi"', recorder.questions[0].text)
        self.assertIn("roots/list", recorder.questions[1].text)

    def test_elicitation_answers_with_the_checks_action_and_the_token(self) -> None:
        recorder = Recorder(token="t2", answers={"elicit": "decline"})
        params = types.ElicitRequestURLParams(message="m", url="http://127.0.0.1:9/x")
        result = asyncio.run(recorder.on_elicit(None, params))
        dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        self.assertEqual(dumped["action"], "decline")
        self.assertEqual(dumped["_meta"], {"dev.mrtr-interop/answer": "answer-t2"})

    def test_only_call_posts_count_as_rounds(self) -> None:
        recorder = Recorder(token="t")
        for body in (b'{"method":"tools/list"}', b"not json", b'[{"method":"prompts/get"}]', b'{"method":"tools/call"}'):
            recorder.note_request(body)
        self.assertEqual(recorder.call_posts, 2)


class CheckTest(unittest.TestCase):
    CHECK = Check(
        "tool",
        {"a": "x-{token}"},
        rounds=[{"elicit": ["Step 1"]}, {"elicit": ["Step 2 {token}"]}],
        expect=("got {token}",),
    )

    @staticmethod
    def recorder(posts: int, *questions: tuple[str, int, str], progress: int = 0) -> Recorder:
        recorder = Recorder(token="k", call_posts=posts, progress=progress)
        recorder.questions.extend(Question(*q) for q in questions)
        return recorder

    def two_rounds(self) -> Recorder:
        return self.recorder(3, ("elicit", 1, '{"m": "Step 1"}'), ("elicit", 2, '{"m": "Step 2 k"}'))

    def test_bind_substitutes_the_token_everywhere(self) -> None:
        bound = self.CHECK.bind("k")
        self.assertEqual((bound.args, bound.rounds[1], bound.expect), ({"a": "x-k"}, {"elicit": ["Step 2 k"]}, ("got k",)))

    def test_verify_passes_only_when_every_fact_holds(self) -> None:
        self.assertIsNone(self.CHECK.bind("k").verify(self.two_rounds(), "we got k", False, True))

    def test_an_extra_or_missing_round_fails(self) -> None:
        bound = self.CHECK.bind("k")
        extra = self.recorder(4, ("elicit", 1, "Step 1"), ("elicit", 2, "Step 2 k"))
        self.assertIn("3 input_required round(s), wanted 2", bound.verify(extra, "got k", False, True))
        short = self.recorder(2, ("elicit", 1, "Step 1"))
        self.assertIn("1 input_required round(s), wanted 2", bound.verify(short, "got k", False, True))

    def test_a_re_asked_question_fails(self) -> None:
        again = self.recorder(3, ("elicit", 1, "Step 1"), ("elicit", 2, "Step 1"), ("elicit", 2, "Step 2 k"))
        self.assertIn("round 2: 2 elicit question(s), wanted 1", self.CHECK.bind("k").verify(again, "got k", False, True))

    def test_a_question_of_another_kind_does_not_count(self) -> None:
        wrong = self.recorder(3, ("sample", 1, "Step 1"), ("elicit", 2, "Step 2 k"))
        self.assertIn("round 1: 0 elicit question(s), wanted 1", self.CHECK.bind("k").verify(wrong, "got k", False, True))

    def test_a_check_needs_exactly_the_kinds_its_rounds_name(self) -> None:
        self.assertEqual(self.CHECK.needs, {"elicit"})
        self.assertEqual(Check("echo").needs, set())
        self.assertEqual(Check("t", rounds=[{"sample": ["a"], "roots": ["roots/list"]}]).needs, {"sample", "roots"})

    def test_roots_questions_are_matched_as_roots(self) -> None:
        self.assertIsNone(match_questions({"roots": ["roots/list"]}, [Question("roots", 1, "roots/list")], "r"))
        self.assertIn("0 roots question", match_questions({"roots": ["roots/list"]}, [], "r"))

    def test_is_error_fails_even_with_the_expected_text(self) -> None:
        self.assertIn("isError", self.CHECK.bind("k").verify(self.two_rounds(), "we got k", True, True))

    def test_progress_is_counted_exactly(self) -> None:
        check = Check("tool", progress=3)
        self.assertIn("2 progress note(s), wanted 3", check.verify(self.recorder(1, progress=2), "", False, True))

    def test_a_legacy_session_is_one_call_with_exactly_the_same_questions(self) -> None:
        bound = self.CHECK.bind("k")
        legacy = self.recorder(1, ("elicit", 1, "Step 1"), ("elicit", 1, "Step 2 k"))
        self.assertIsNone(bound.verify(legacy, "got k", False, False))
        legacy.questions.append(Question("roots", 1, "roots/list"))
        self.assertIn("1 roots question(s), wanted 0", bound.verify(legacy, "got k", False, False))

    def test_the_answer_token_is_required_back_exactly_when_it_was_sent(self) -> None:
        check = Check("tool", expect=("declined", "answer-{token}")).bind("k")
        recorder = self.recorder(1)
        self.assertIsNone(check.verify(recorder, "declined", False, False))
        recorder.note_request(b'{"id":1,"result":{"action":"decline","_meta":{"x":"answer-k"}}}')
        self.assertIn("result lacks 'answer-k'", check.verify(recorder, "declined", False, False))

    def test_result_must_hold_the_token_fragment(self) -> None:
        self.assertIn("result lacks 'got k'", self.CHECK.bind("k").verify(self.two_rounds(), "canned", False, True))

    def test_absent_fragments_fail_the_check(self) -> None:
        check = Check("tool", expect=("dirs: /s/root",), absent=("/s/cmdline",)).bind("k")
        self.assertIsNone(check.verify(self.recorder(1), "dirs: /s/root", False, True))
        self.assertIn("result contains '/s/cmdline'", check.verify(self.recorder(1), "dirs: /s/root\n/s/cmdline", False, True))

    def test_declared_kinds_are_needed_without_a_round(self) -> None:
        self.assertEqual(Check("t", declare=["roots"]).needs, {"roots"})
        self.assertIn("1 question(s) outside any round", Check("t", declare=["roots"]).verify(
            self.recorder(1, ("roots", 1, "roots/list")), "", False, True))

    def test_the_scratch_folder_is_substituted_and_required(self) -> None:
        check = Check("t", args={"path": "{dir}/n-{token}"}, setup=[{"write": "{dir}/n-{token}", "text": "t-{token}"}])
        bound = check.bind("k", '/s/a"b')
        self.assertEqual(bound.args, {"path": '/s/a"b/n-k'})
        self.assertEqual(bound.setup, ({"write": '/s/a"b/n-k', "text": "t-k"},))
        with self.assertRaises(ValueError):
            check.bind("k")


class LogTest(unittest.TestCase):
    def test_without_a_level_no_log_may_arrive(self) -> None:
        self.assertIsNone(match_logs([], [], False))
        self.assertIn("1 log message(s) without a log level", match_logs([], ['{"level": "info"}'], False))

    def test_with_a_level_exactly_the_named_logs_arrive(self) -> None:
        logs = ['{"level": "info", "data": "started"}', '{"level": "info", "data": "done"}']
        self.assertIsNone(match_logs(["done", "started"], logs, True))
        self.assertIn("2 log message(s), wanted 1", match_logs(["started"], logs, True))
        self.assertIn("no log message containing 'started'", match_logs(["done", "started"], [logs[1], logs[1]], True))
        self.assertIsNone(match_logs([], [], True))
        self.assertIn("1 log message(s), wanted 0", match_logs([], logs[:1], True))

    def test_verify_judges_logs_for_a_2026_client_only(self) -> None:
        check = Check("tool", log="info", logs=["ran {token}"]).bind("k")
        recorder = Recorder(token="k", call_posts=1)
        self.assertIn("0 log message(s), wanted 1", check.verify(recorder, "", False, True))
        recorder.logs.append('{"level": "info", "data": "ran k"}')
        self.assertIsNone(check.verify(recorder, "", False, True))
        # A legacy session's logs are the session's, not the call's: not judged.
        self.assertIsNone(Check("tool").verify(recorder, "", False, False))
        self.assertIn("without a log level", Check("tool").verify(recorder, "", False, True))

    def test_the_recorder_keeps_each_log_message(self) -> None:
        recorder = Recorder(token="t")
        params = types.LoggingMessageNotificationParams(level="warning", logger="l", data="disk low")
        asyncio.run(recorder.on_log(params))
        self.assertEqual(len(recorder.logs), 1)
        self.assertIn('"disk low"', recorder.logs[0])
        self.assertIn('"warning"', recorder.logs[0])


class RefusalTest(unittest.TestCase):
    def test_only_the_named_refusal_counts(self) -> None:
        wanted = "Bad Request: Server not initialized"
        self.assertIsNone(refusal_problem(MCPError(-32000, wanted), wanted, MCPError))
        grouped = ExceptionGroup("outer", [MCPError(-32000, wanted)])
        self.assertIsNone(refusal_problem(grouped, wanted, MCPError))
        self.assertIn("refused, but not with", refusal_problem(ConnectionRefusedError("refused"), wanted, MCPError))
        self.assertIn("refused, but not with", refusal_problem(TypeError(wanted), wanted, MCPError))
        self.assertIn("refused, but not with", refusal_problem(MCPError(-32601, "Method not found"), wanted, MCPError))


class TableTest(unittest.TestCase):
    def test_the_shared_table_loads_every_server_and_the_http_ones_refusals(self) -> None:
        self.assertEqual(set(CHECKS), {"everything", "everything-one-stream", "fixture", "filesystem", "memory", "git"})
        self.assertEqual(set(REFUSALS), {"everything", "fixture"})
        self.assertIn("trigger-url-elicitation#decline", [c.label for c in CHECKS["everything"]])

    def test_labels_are_unique_per_server(self) -> None:
        for checks in CHECKS.values():
            labels = [c.label for c in checks]
            self.assertEqual(len(labels), len(set(labels)))

    def test_select_filters_by_label_or_tool_name(self) -> None:
        self.assertEqual([c.name for c in select("everything", "echo")], ["echo"])
        self.assertEqual(len(select("everything", "trigger-url-elicitation")), 4)
        self.assertEqual([c.label for c in select("everything", "trigger-url-elicitation#cancel")], ["trigger-url-elicitation#cancel"])
        self.assertEqual(select("everything", "nope"), [])

    def test_a_legacy_session_runs_no_modern_check(self) -> None:
        modern = [c.label for c in select("everything", "trigger-url-elicitation")]
        legacy = [c.label for c in select("everything", "trigger-url-elicitation", modern=False)]
        self.assertIn("trigger-url-elicitation#error-path", modern)
        self.assertEqual(legacy, [label for label in modern if label != "trigger-url-elicitation#error-path"])
        self.assertTrue(all(not c.modern for c in select("fixture", "", modern=False)))

    def test_describe_failure_unwraps_task_groups(self) -> None:
        error = ExceptionGroup("outer", [ValueError("inner cause")])
        self.assertEqual(describe_failure(error), "ValueError: inner cause")


if __name__ == "__main__":
    unittest.main()
