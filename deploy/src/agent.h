/* agent.h — `kernbench agent` (agent.c): one host's part of a run across
 * hosts, its daemons run by the host module (launch.h, kb_local_*).
 *
 * May use: cli (its options), launch and strays (the host module), mesh,
 * hosts, hostkeys, stops, tidy, the runtime; never the coordinator's side
 * or the outputs. */
#ifndef KB_AGENT_H
#define KB_AGENT_H

/* `kernbench agent ...`: returns the exit status. */
int kb_agent_main(int argc, char **argv);

#endif
