"""The counterexample explorer: replay refuted properties' witnesses and show them as traces.

``explain_verdicts`` / ``explain_report`` re-evaluate each witness input on the reference interpreter
(``replay``); ``print_explained`` renders a result in the terminal and ``write_html`` as one self-contained
HTML page with attention heatmaps (inline SVG). The witness convention they rely on is in
``witness_roles`` and docs/explore.md.
"""

from .html import render_html, write_html
from .replay import Explained, ExplainError, RoleTrace, explain_report, explain_verdict, explain_verdicts
from .terminal import print_explained
from .witness_roles import WitnessRoles, roles_of

__all__ = [
    "ExplainError",
    "Explained",
    "RoleTrace",
    "WitnessRoles",
    "explain_report",
    "explain_verdict",
    "explain_verdicts",
    "print_explained",
    "render_html",
    "roles_of",
    "write_html",
]
