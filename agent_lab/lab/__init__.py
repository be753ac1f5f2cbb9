"""The contract lab: a ticket backend, two tool surfaces over it, replayed cases, grades and reports.

Entry points others rely on: `backend.TicketBackend`, `candidate.candidate_specs`,
`candidate.build_candidate_registry`, `baseline.build_baseline_registry`, `tool_eval.run_tool_eval`.
"""
