"""Unit tests of park_report.py's verdicts (python -m unittest test_park_report)."""

import unittest

from park_report import client_rounds, crossing, outcome_problems, outcomes, prompts, served, served_problems

RESULTS = [
    "PASS py fixture-park test_input_required_result_multi_round ok (rounds=2,elicit=2)",
    "PASS ts fixture-park test_input_required_result_elicitation#decline ok (rounds=1,elicit=1)",
    "PASS ts fixture-park test_input_required_result_elicitation ok (rounds=1,elicit=1)",
    "PASS py fixture-park test_simple_text ok (rounds=0)",
    "FAIL py fixture-park test_input_required_result_sampling 2 input_required round(s), wanted 1",
    "PASS py fixture-two-gateways test_input_required_result_multi_round ok (rounds=2,elicit=2)",
]
TARGETS = ["py:fixture-park", "ts:fixture-park"]


def report(*tools):
    return {"tools": [{"tool": name, "served": served} for name, served in tools]}


class Verdicts(unittest.TestCase):
    def test_rounds_are_summed_per_tool_over_the_targets_passing_lines(self):
        self.assertEqual(
            client_rounds(RESULTS, TARGETS),
            {"test_input_required_result_multi_round": 2, "test_input_required_result_elicitation": 2,
             "test_simple_text": 0},
        )

    def test_prompt_checks_are_known_by_their_kind(self):
        table = {"fixture": [{"name": "p", "kind": "prompt"}, {"name": "t"}], "_refusals": {}}
        self.assertEqual(prompts(table), {"p"})

    def test_only_retries_that_reached_the_other_replica_cross(self):
        log = [
            "rr 1 POST /mcp -> 0",
            "rr-retry 2 state=a sealed-by=0 sent-to=1",
            "rr-retry 3 state=b sealed-by=1 sent-to=1",
            "rr-retry 4 state=c sealed-by=unknown sent-to=0",
        ]
        self.assertEqual(crossing(log), (3, 1))

    def test_reports_and_metrics_are_summed_over_the_replicas(self):
        a = report(("t", {"direct": 1, "forwarded": 1}))
        b = report(("t", {"park": 2}), ("u", {"replay": 1}))
        self.assertEqual(served([a, b]), {"t": {"direct": 1, "forwarded": 1, "park": 2}, "u": {"replay": 1}})
        text = 'mrtr_gateway_park_outcomes_total{outcome="resumed"} 2\n# HELP x\nother 5\n'
        self.assertEqual(outcomes([text, text]), {"resumed": 4.0})

    def test_a_parking_tool_must_never_be_replayed(self):
        rounds = {"t": 3}
        self.assertEqual(served_problems(rounds, {"t": {"park": 2, "forwarded": 1}}, lambda _: True), [])
        replayed = served_problems(rounds, {"t": {"park": 2, "replay": 1}}, lambda _: True)
        self.assertEqual(len(replayed), 1)
        self.assertIn("park+forwarded=2 replay+fallback=1", replayed[0])

    def test_a_replaying_tool_must_never_park(self):
        rounds = {"u": 1}
        self.assertEqual(served_problems(rounds, {"u": {"replay": 1}}, lambda _: False), [])
        self.assertEqual(len(served_problems(rounds, {"u": {"forwarded": 1}}, lambda _: False)), 1)

    def test_every_parked_round_resumes_one_crosses_and_none_falls_back(self):
        self.assertEqual(outcome_problems(3, {"parked": 3, "resumed": 3, "forwarded": 2}), [])
        self.assertEqual(outcome_problems(3, {"resumed": 3}), ["no retry was forwarded to its owner"])
        self.assertEqual(outcome_problems(3, {"resumed": 2, "forwarded": 1, "fallback": 1}),
                         ["resumed=2, wanted 3", "fallback=1"])
        self.assertEqual(outcome_problems(0, {}), [])


if __name__ == "__main__":
    unittest.main()
