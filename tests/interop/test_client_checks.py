"""Unit tests of the client-check verdicts (run: .venv-modern/bin/python -m unittest test_client_checks)."""

from __future__ import annotations

import asyncio
import unittest

from mcp import types

from client_checks import CHECKS, Check, Recorder, describe_failure, select


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

    def test_callbacks_count_and_answer_with_the_token(self) -> None:
        recorder = Recorder(token="t1")
        message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi"))
        params = types.CreateMessageRequestParams(messages=[message], max_tokens=5)
        sampled = asyncio.run(recorder.on_sample(None, params))
        roots = asyncio.run(recorder.on_roots(None))
        self.assertEqual(sampled.content.text, "sampled-t1")
        self.assertEqual(str(roots.roots[0].uri), "file:///interop/t1")
        self.assertEqual((recorder.counts["sample"], recorder.counts["roots"]), (1, 1))
        self.assertIn('"hi"', recorder.questions[0])


class CheckTest(unittest.TestCase):
    CHECK = Check("tool", {"a": "x-{token}"}, calls={"elicit": 1}, question="Q {token}", expect=("got {token}",))

    def recorder(self, elicits: int, question: str) -> Recorder:
        recorder = Recorder(token="k")
        recorder.counts["elicit"] = elicits
        recorder.questions.append(question)
        return recorder

    def test_bind_substitutes_the_token_everywhere(self) -> None:
        bound = self.CHECK.bind("k")
        self.assertEqual((bound.args, bound.question, bound.expect), ({"a": "x-k"}, "Q k", ("got k",)))

    def test_verify_passes_only_when_every_fact_holds(self) -> None:
        bound = self.CHECK.bind("k")
        self.assertIsNone(bound.verify(self.recorder(1, '{"m": "Q k"}'), "we got k"))

    def test_verify_names_the_first_broken_fact(self) -> None:
        bound = self.CHECK.bind("k")
        self.assertIn("elicit callback ran 0x", bound.verify(self.recorder(0, "Q k"), "got k"))
        self.assertIn("no question containing 'Q k'", bound.verify(self.recorder(1, "other"), "got k"))
        self.assertIn("result lacks 'got k'", bound.verify(self.recorder(1, "Q k"), "canned"))


class TableTest(unittest.TestCase):
    def test_the_shared_table_loads_both_servers(self) -> None:
        self.assertEqual(set(CHECKS), {"everything", "fixture"})
        self.assertIn("trigger-elicitation-request", [c.name for c in CHECKS["everything"]])

    def test_select_filters_by_name(self) -> None:
        self.assertEqual([c.name for c in select("everything", "echo")], ["echo"])
        self.assertEqual(select("everything", "nope"), [])

    def test_describe_failure_unwraps_task_groups(self) -> None:
        error = ExceptionGroup("outer", [ValueError("inner cause")])
        self.assertEqual(describe_failure(error), "ValueError: inner cause")


if __name__ == "__main__":
    unittest.main()
