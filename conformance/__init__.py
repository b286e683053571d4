"""The shared conformance suite (see ARCHITECTURE.md section 5); filled in by its own issue."""
