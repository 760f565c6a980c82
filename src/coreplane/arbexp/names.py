"""What the arbiter's experiments vary and report: Tables 1-2's operations, Figure 6's borrowers, the pool's programs, the gang-stop settings."""

# ROS Tables 1-2's operations as `coreplane arbiter tables` names them, in the tables' order.
TABLE_OPS = ["create_scp", "create_mcp", "get_one_vcore_warm", "get_one_vcore_cold", "yield_one_vcore",
             "preempt_one_no_warning", "warn_preempt_one_cooperative", "warn_preempt_one_runtime",
             "preempt_uncooperative_after_deadline",
             "kill_mcp_reclaimed"]
BORROWERS = ["coop", "spin"]
POOL_PROGRAMS = ["adaptive", "fixed", "fixed+1"]
# The pool experiment's gang-stop parameter: the flag itself, and how figures name it.
GANG = {"--no-gang-stop": "no gang stop", "--gang-stop": "gang stop"}
