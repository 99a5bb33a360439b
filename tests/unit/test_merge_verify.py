"""What the verification after a merge says on the issue (workflows/merge_verify.py): the
report's wording per outcome and how check names are shown."""

from __future__ import annotations

import pytest

from shopfloor.models.merge_verify import MergeVerifyInput, MergeVerifyOutcome, merge_verify_workflow_id
from shopfloor.workflows.merge_verify import NAMES_SHOWN, check_names, report_text, revert_body, revert_branch

pytestmark = pytest.mark.fast

SHA = "0123456789abcdef0123456789abcdef01234567"
INP = MergeVerifyInput(repo="acme/shop", number=7, pr_number=9, sha=SHA, branch="main", timeout_minutes=15)


def test_red_names_the_failing_checks_and_says_the_issue_was_reopened_not_reverted():
    text = report_text(INP, MergeVerifyOutcome(state="failure", sha=SHA, failing=["ci", "lint"]))
    assert text.startswith("**CI failed** on `main` after the merge of #9 (commit `0123456789ab`).")
    assert "Failing: `ci`, `lint`." in text
    assert "reopened this issue" in text and "not reverted" in text


def test_green_and_timeout_say_what_happened():
    assert report_text(INP, MergeVerifyOutcome(state="success", sha=SHA)) == (
        "**CI passed** on `main` after the merge of #9 (commit `0123456789ab`)."
    )
    late = report_text(INP, MergeVerifyOutcome(state="timeout", sha=SHA, waiting=["e2e"]))
    assert "**No CI result** on `main`" in late and "within 15 minutes" in late and "Still waiting for: `e2e`." in late
    assert "No check reported." in report_text(INP, MergeVerifyOutcome(state="timeout", sha=SHA))


def test_check_names_are_inert_code_deduplicated_and_bounded():
    assert check_names(["a`b", "@team", "a`b"]) == "`a'b`, `@team`"
    many = check_names([f"c{i}" for i in range(NAMES_SHOWN + 3)])
    assert many.endswith("and 3 more") and many.count("`") == 2 * NAMES_SHOWN


def test_a_branch_name_cannot_break_out_of_its_code_span():
    odd = INP.model_copy(update={"branch": "ma`in @x"})
    assert "on `ma'in @x` after" in report_text(odd, MergeVerifyOutcome(state="success", sha=SHA))


def test_one_verification_per_merge_commit():
    assert merge_verify_workflow_id("acme/shop", 7, SHA) == "verify/acme/shop/7/0123456789ab"
    with pytest.raises(ValueError):
        MergeVerifyInput(repo="acme/shop", number=7, sha="not-a-sha", branch="main")


def test_a_red_report_names_the_revert_pull_request_when_one_was_opened():
    red = MergeVerifyOutcome(state="failure", sha=SHA, failing=["ci"], revert_pr=12)
    assert "#12 reverts the merge, as the repository's policy asks" in report_text(INP, red)
    assert "The merge was not reverted" in report_text(INP, red.model_copy(update={"revert_pr": None}))
    assert revert_branch(INP) == f"shopfloor/revert-7-{SHA[:12]}"
    body = revert_body(INP, red)
    assert "merged #9 for #7" in body and "`ci`" in body and "revert_on_red_default_branch" in body
