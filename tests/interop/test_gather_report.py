"""Unit tests of gather_report.py (python -m unittest test_gather_report)."""

import json
import unittest

from gather_report import rounds, summary

TOOL = "multi"


def line(message, request, **fields):
    headers = json.dumps({"mcp-name": TOOL})
    return json.dumps({"fields": {"message": message, **fields}, "span": {"request_id": request, "headers": headers}})


class GatherReport(unittest.TestCase):
    def test_questions_are_counted_per_round_and_gaps_kept(self):
        log = [
            line("first unanswered question: gathering", "r1"),
            line("question gathered", "r1", open=2, since_last_us=300),
            "not json",
            line("first unanswered question: gathering", "r2"),
            line("question gathered", "r1", open=3, since_last_us=900),
            line("question gathered", "r2", open=2, since_last_us=7000),
            json.dumps({"fields": {"message": "question gathered", "open": 9}, "span": {"request_id": "x", "headers": "{}"}}),
        ]
        self.assertEqual(rounds(log, TOOL), ([3, 2], [300, 900, 7000]))

    def test_a_split_round_fails_and_the_gaps_are_reported(self):
        ok, detail = summary([3, 2], [300, 900, 7000], 3, 5)
        self.assertFalse(ok)
        self.assertIn("questions per round [3, 2], wanted 3 each", detail)
        self.assertIn("largest 7000 µs, median 900 µs", detail)
        self.assertTrue(summary([3, 3], [1, 2], 3, 5)[0])
        self.assertFalse(summary([], [], 3, 5)[0], "no round at all proves nothing")


if __name__ == "__main__":
    unittest.main()
