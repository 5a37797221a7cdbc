---------------------------- MODULE MCScheduler ----------------------------
(***************************************************************************)
(* Model-checking harness for Scheduler: concrete constants, an initial   *)
(* state with every model registered and unloaded (as spec/env's setup    *)
(* leaves it), and a state constraint bounding the tickets handed out.    *)
(* MCSchedulerSmall.cfg and MCSchedulerLarge.cfg instantiate it.          *)
(***************************************************************************)
EXTENDS Scheduler, TLC

CONSTANTS m0, m1, m2, MaxTickets, NModels, InitSlots

\* Configs are records: sess names the session inputs (engine, checkpoint,
\* options), timeout is the admission timeout (NoTimeout: server default).
Cfg(sess, slots) == [sess |-> sess, slots |-> slots, timeout |-> 0, maxq |-> 0, mem |-> 100]

MCModels == IF NModels = 2 THEN {m0, m1} ELSE {m0, m1, m2}
InitCfg == Cfg("a", InitSlots)
\* The registration config, a replacement with changed session inputs (it is
\* probed), and one with the same inputs and fewer slots (replaced at once).
MCConfigs == {InitCfg, Cfg("b", InitSlots), Cfg("a", InitSlots - 1)}
MCCapacities == {InitSlots - 1, 4}
MCSelections == {SetToSeq(MCModels)}
MCTickets == 1..MaxTickets
MCRestores == {[base |-> 0, only |-> FALSE], [base |-> 0, only |-> TRUE]}

MCInit ==
    /\ models = [m \in ModelIds |-> [Unregistered EXCEPT !.reg = TRUE, !.cfg = InitCfg, !.ver = 1]]
    /\ order = SetToSeq(ModelIds)
    /\ loaders = <<>>
    /\ bulks = <<>>
    /\ shutdown = FALSE
    /\ shutdownSent = FALSE
    /\ seq = 0
    /\ nextId = 0
    /\ clock = 0
    /\ settling = FALSE
    /\ out = <<>>
    /\ evicted = {}

MCSpec == MCInit /\ [][Next]_vars /\ Fairness

\* The bound: at most MaxTickets submissions.
StateBound == nextId <= MaxTickets

\* Model identities are interchangeable (safety only: TLC's symmetry
\* reduction is not sound for liveness properties).
ModelSymmetry == Permutations(MCModels)
=============================================================================
