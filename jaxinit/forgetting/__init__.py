"""The initialization-memory study (Das et al. 2026, THEORY.md section 6): members, run loop, analysis, figures."""
