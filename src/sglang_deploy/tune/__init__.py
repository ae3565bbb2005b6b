"""Flag-matrix search ("tune"): pure domain logic, nothing here talks to a host or prints.

- searchfile: the search file (Search, its axes, workload, objectives, limits) and its parser
- expansion: every combination of the axes, minus those the constraints drop (Candidate)
- planning: candidates rendered and validated for every host, pruned by the rules, keyed (HostFacts, Planned)
- store: the result store (one JSON file per run, written as it completes) and the figures of a run
- loop: the search loop over a deploy callable, within a budget (run_search, Budget, Deployer)
- ranking, outcome: ranking with noise, the winner, and what a search found (Outcome)
- promotion: the winner written as a profile into a group_vars file
- report: the report (text, Markdown, Pareto plot, JSON)

The API (sglang_deploy.api.search) passes the loop a deploy that runs the deploy playbook.
"""

from .expansion import expand, one_line
from .loop import Budget, Deployer, run_search
from .outcome import Outcome
from .planning import HostFacts, Planned, candidate_key, plan, run_key, stack_id
from .promotion import check_promotion, limits_broken, promote_profile, promotion_body
from .ranking import decide
from .searchfile import SEARCH_VARS, Limit, Objective, Search, SearchError, Workload, load_search, parse_search
from .store import FAILED, OK, Store

__all__ = [
    "FAILED",
    "OK",
    "SEARCH_VARS",
    "Budget",
    "Deployer",
    "HostFacts",
    "Limit",
    "Objective",
    "Outcome",
    "Planned",
    "Search",
    "SearchError",
    "Store",
    "Workload",
    "candidate_key",
    "check_promotion",
    "decide",
    "expand",
    "limits_broken",
    "load_search",
    "one_line",
    "parse_search",
    "plan",
    "promote_profile",
    "promotion_body",
    "run_key",
    "run_search",
    "stack_id",
]
