"""Pre-launch validation: the rules that refuse a launch SGLang would crash on, before a host is touched.

- rules: validate a rendered launch (RULES, validate, check)
- hardware_rules: the rules on the GPUs, the parallel shape, the checkpoint
- rule_context: what a rule is and sees (Rule, Finding, Ctx)
- launch_facts: the checkpoint's and the GPUs' facts the rules read
"""
