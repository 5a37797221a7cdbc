----------------------------- MODULE Scheduler -----------------------------
(***************************************************************************)
(* Sluice's scheduler contract (CONTRACT.md) as a state machine.           *)
(*                                                                         *)
(* Models hold a lifecycle state, a committed config and version, a pool,  *)
(* a FIFO of tickets (requests, targeted managers and bulk-unload          *)
(* barriers), the requests admitted to its slots and at most one granted   *)
(* manager.  A loader queue, the residency ledger, live bulk parents and   *)
(* the shutdown phase are global.                                          *)
(*                                                                         *)
(* Every step of the machine is one EVENT action, named exactly as the     *)
(* events of package core (SubmitRequest, SubmitManager, SubmitBulkUnload, *)
(* Cancel, Release, LoadDone, CloneDone, ProbeDone, TeardownDone, Tick,    *)
(* BeginShutdown), followed by INTERNAL actions (Pump, LoaderStep,         *)
(* ShutdownRetire, CompleteShutdown) in any order until none is enabled    *)
(* (Quiesce).  Internal actions are never logged in a trace.  The          *)
(* invariants carry the names of core.Invariants and hold in every         *)
(* quiescent state.                                                        *)
(*                                                                         *)
(* The executable transcription of this module is spec/abstract (Go); the  *)
(* test spec/names_test.go keeps the action and invariant names of both    *)
(* and of core identical.                                                  *)
(*                                                                         *)
(* State is written functionally: S is the whole state as a record, the    *)
(* helper operators map such records to records, and Commit(T) assigns a   *)
(* record to the variables, as the Go transcription mutates a copy.        *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets

CONSTANTS
    ModelIds,           \* the model universe
    Configs,            \* configs: [sess, slots, timeout, maxq, mem]
    MaxLoaded,          \* resident model limit, 0 = none
    MemoryBudget,       \* resident memory limit (MB), 0 = none
    SerializeColdLoads, \* the global cold-load guard
    IdleRetire,         \* idle retirement on Tick
    DefaultTimeout,     \* server default admission timeout, 0 = unbounded
    Ceiling,            \* admission ceiling, 0 = none
    LoadBackoff,        \* a failed load backs off (core.Options.LoadBackoff > 0)
    Capacities,         \* capacities a backend may advertise
    BulkSelections,     \* the ID sequences a bulk unload may name
    TicketIds,          \* the ticket numbers a run may hand out
    Restores            \* what a registration restored from the persistent
                        \* registry carries: [base |-> saved version or 0,
                        \* only |-> register unloaded] (CONTRACT persist.restore)

NoTimeout == -1                 \* "use the next default"
MaxSlots == 16
MaxMemoryMB == 2^40             \* core.MaxMemoryMB: one pool's estimate and the budget
Reasons == {"timeout", "disconnect"}
NoEntry == [id |-> 0, kind |-> "none", op |-> "none", cfg |-> "none", bounded |-> FALSE, bulk |-> 0, seq |-> 0]

VARIABLES
    models,       \* [ModelIds -> model record]; reg = FALSE for unknown IDs and
                  \* for unregistered ones (tombstones: they keep ver)
    order,        \* IDs in first-registration order (core's handles; an entry
                  \* is never erased, a re-registration reuses its place)
    loaders,      \* models waiting for residency or the cold-load guard
    bulks,        \* live bulk parents, in submission order
    shutdown,     \* BeginShutdown happened
    shutdownSent, \* ShutdownComplete was emitted
    seq,          \* last arrival number
    nextId,       \* last ticket number
    clock,        \* event count: the order of events, for least-recently-used eviction
    settling,     \* an event happened and internal steps may still run
    out,          \* effects of the current event (a history variable)
    evicted       \* retirements by eviction/idle in this event (history)

vars == <<models, order, loaders, bulks, shutdown, shutdownSent, seq, nextId, clock, settling, out, evicted>>

Unregistered == [reg |-> FALSE, life |-> "unloaded", cfg |-> "none", ver |-> 0, published |-> FALSE,
                 poolVer |-> 0, sessions |-> 0, capacity |-> 0, built |-> 0, holders |-> {},
                 queue |-> <<>>, mgr |-> NoEntry, step |-> "none", failCode |-> "none", job |-> "none",
                 cause |-> "none", resident |-> FALSE, resMB |-> 0, lastUse |-> 0, backoff |-> FALSE]

Init ==
    /\ models = [m \in ModelIds |-> Unregistered]
    /\ order = <<>>
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

-----------------------------------------------------------------------------
(* The state as a record, and back.                                        *)

S == [models |-> models, order |-> order, loaders |-> loaders, bulks |-> bulks, shutdown |-> shutdown,
      sent |-> shutdownSent, seq |-> seq, nextId |-> nextId, clock |-> clock, out |-> out, evicted |-> evicted]

\* An event starts with no effects yet, at the next tick of the clock.
Fresh == [S EXCEPT !.out = <<>>, !.evicted = {}, !.clock = @ + 1]

Commit(T) ==
    /\ models' = T.models
    /\ order' = T.order
    /\ loaders' = T.loaders
    /\ bulks' = T.bulks
    /\ shutdown' = T.shutdown
    /\ shutdownSent' = T.sent
    /\ seq' = T.seq
    /\ nextId' = T.nextId
    /\ clock' = T.clock
    /\ out' = T.out
    /\ evicted' = T.evicted

-----------------------------------------------------------------------------
(* Helpers over sequences, sets and records.                               *)

Range(s) == {s[i] : i \in DOMAIN s}
RemoveAt(s, i) == [j \in 1..(Len(s) - 1) |-> IF j < i THEN s[j] ELSE s[j + 1]]
\* The elements of a finite set as a sequence, in some order.
SetToSeq(A) == CHOOSE f \in [1..Cardinality(A) -> A] : \A i, j \in DOMAIN f : i # j => f[i] # f[j]
\* The queue entries of every model, as <<model, index>> pairs.
QueuedAt(T) == UNION {{<<m, i>> : i \in DOMAIN T.models[m].queue} : m \in ModelIds}
RECURSIVE SumResMB(_, _)
SumResMB(T, X) == IF X = {} THEN 0
                  ELSE LET x == CHOOSE x \in X : TRUE IN T.models[x].resMB + SumResMB(T, X \ {x})
Registered(T) == {m \in ModelIds : T.models[m].reg}
Emit(T, e) == [T EXCEPT !.out = Append(@, e)]
Ans(kind, t, code) == [kind |-> kind, ticket |-> t, code |-> code]

Active(md) == Cardinality(md.holders)
WaitInit(md) == Cardinality({h \in md.holders : h.wait})
Running(md) == {h \in md.holders : ~h.wait}
QueuedRequests(md) == Cardinality({i \in DOMAIN md.queue : md.queue[i].kind = "req"})
HasMgr(md) == md.mgr.kind # "none"
InLoaders(T, m) == m \in Range(T.loaders)
Loads(T) == Cardinality({m \in ModelIds : T.models[m].job \in {"load", "clone"}})
Jobs(T) == Cardinality({m \in ModelIds : T.models[m].job # "none"})
SameSessions(c, d) == c.sess = d.sess
ValidConfig(c) == c # "none" /\ c.slots \in 1..MaxSlots /\ c.timeout >= NoTimeout /\ c.maxq >= 0 /\ c.mem >= 0

\* The effective admission timeout is finite: request override, then the
\* model's, then the server default, capped by the ceiling.
Bounded(md, override) ==
    LET d1 == IF override # NoTimeout THEN override ELSE md.cfg.timeout
        d2 == IF d1 = NoTimeout THEN DefaultTimeout ELSE d1
        d3 == IF Ceiling > 0 /\ (d2 = 0 \/ d2 > Ceiling) THEN Ceiling ELSE d2
    IN d3 > 0

Admittable(md) == md.life = "ready" \/ md.life = "unloaded" \/ (md.life = "loading" /\ ~HasMgr(md))

Settled(T, m) ==
    LET md == T.models[m] IN
    ~HasMgr(md) /\ Active(md) = 0 /\ md.job = "none" /\ ~InLoaders(T, m) /\ md.life \in {"unloaded", "ready"}

\* CONTRACT res.victim-choice, res.idle-retirement.
Evictable(T, m) ==
    LET md == T.models[m] IN
    md.published /\ md.life = "ready" /\ Active(md) = 0 /\ md.queue = <<>> /\ ~HasMgr(md) /\
    md.job = "none" /\ ~InLoaders(T, m)

MembersOf(T, b) ==
    {m \in ModelIds : T.models[m].mgr.kind = "member" /\ T.models[m].mgr.bulk = b}
    \cup {x[1] : x \in {y \in QueuedAt(T) : T.models[y[1]].queue[y[2]].kind = "member" /\
                                             T.models[y[1]].queue[y[2]].bulk = b}}

LiveTickets(T) ==
    Len(T.bulks) + Cardinality(UNION {{<<m, h>> : h \in T.models[m].holders} : m \in ModelIds})
    + Cardinality(QueuedAt(T)) + Cardinality({m \in ModelIds : HasMgr(T.models[m])})

-----------------------------------------------------------------------------
(* The contract's transitions as functions of the state record.            *)

StartLoad(T, m) == [T EXCEPT !.models[m].life = "loading", !.loaders = Append(@, m)]

WithdrawLoad(T, m) ==
    [T EXCEPT !.loaders = SelectSeq(@, LAMBDA x : x # m), !.models[m].life = "unloaded"]

\* CONTRACT order.bulk-cancel: a bulk ends when its last member does.
BulkCheck(T, b) ==
    IF MembersOf(T, b) # {} \/ ~\E k \in DOMAIN T.bulks : T.bulks[k].id = b THEN T
    ELSE LET k == CHOOSE k \in DOMAIN T.bulks : T.bulks[k].id = b
             bk == T.bulks[k]
             U == [T EXCEPT !.bulks = RemoveAt(@, k)]
         IN CASE bk.reason = "none" -> Emit(U, [kind |-> "Done", ticket |-> b, code |-> "ok"])
              [] bk.reason = "disconnect" -> Emit(U, Ans("Reject", b, "cancelled"))
              [] OTHER -> Emit(U, Ans("Reject", b, "shutting_down"))

ManagerDone(T, m, kind, code) ==
    LET e == T.models[m].mgr
        U == [T EXCEPT !.models[m].mgr = NoEntry, !.models[m].step = "none", !.models[m].failCode = "none"]
    IN IF e.kind = "member" THEN BulkCheck(U, e.bulk) ELSE Emit(U, Ans(kind, e.id, code))

RECURSIVE BulkCheckAll(_, _)
BulkCheckAll(T, B) == IF B = {} THEN T ELSE LET b == CHOOSE b \in B : TRUE IN BulkCheckAll(BulkCheck(T, b), B \ {b})

\* CONTRACT unreg.barrier, unreg.404-after, unreg.tombstone: the granted
\* unregister found the model unloaded and drained, so nothing holds its
\* pool; the entry becomes a tombstone that keeps only its version (so a
\* re-registration never repeats one), every ticket queued behind the
\* barrier is answered not_found in arrival order, and a bulk's barrier on
\* it ends as if unloaded.
Tombstone(T, m) ==
    LET md == T.models[m]
        q == SelectSeq(md.queue, LAMBDA e : e.kind # "member")
        hit == {md.queue[i].bulk : i \in {j \in DOMAIN md.queue : md.queue[j].kind = "member"}}
        U == [T EXCEPT !.models[m] = [Unregistered EXCEPT !.ver = md.ver],
                       !.out = @ \o [i \in DOMAIN q |-> Ans("Reject", q[i].id, "not_found")]]
    IN BulkCheckAll(U, hit)

\* CONTRACT state.unloading: logical retirement is not free memory.
Retire(T, m, cause) ==
    LET md == T.models[m]
        U == IF cause \in {"evict", "idle"}
             THEN [T EXCEPT !.evicted = @ \cup {[model |-> m, active |-> Active(md), queued |-> Len(md.queue),
                                                  mgr |-> HasMgr(md), published |-> md.published]}]
             ELSE T
        V == [U EXCEPT !.models[m].life = "unloading", !.models[m].published = FALSE, !.models[m].poolVer = 0,
                       !.models[m].capacity = 0, !.models[m].sessions = 0, !.models[m].built = 0,
                       !.models[m].cause = cause, !.models[m].job = "teardown"]
    IN Emit(V, [kind |-> "StartTeardown", model |-> m, sessions |-> md.sessions, cause |-> cause])

Unresident(T, m) == [T EXCEPT !.models[m].resident = FALSE, !.models[m].resMB = 0]

\* CONTRACT fail.initial-load, reg.first-load-failure: waiting
\* requests are answered at once; a manager keeps its ownership until the
\* private sessions are gone, so its answer finds the model unloaded.
\* A load that failed (not one residency refused) backs off
\* (CONTRACT fail.load-backoff).
FailLoad(T, m, code, private) ==
    LET md == T.models[m]
        waiters == {h \in md.holders : h.wait}
        U == [T EXCEPT !.models[m].capacity = 0, !.models[m].built = 0,
                       !.models[m].backoff = IF LoadBackoff /\ code \in {"backend_error", "invalid_request"}
                                             THEN TRUE ELSE @,
                       !.models[m].holders = @ \ waiters,
                       !.out = @ \o SetToSeq({Ans("Reject", h.id, code) : h \in waiters})]
    IN IF private > 0
       THEN Emit([U EXCEPT !.models[m].life = "unloading", !.models[m].cause = "failed_load",
                           !.models[m].job = "teardown",
                           !.models[m].step = IF HasMgr(md) THEN "fail_teardown" ELSE @,
                           !.models[m].failCode = IF HasMgr(md) THEN code ELSE @],
                 [kind |-> "StartTeardown", model |-> m, sessions |-> private, cause |-> "failed_load"])
       ELSE LET V == IF HasMgr(md) THEN ManagerDone(U, m, "Reject", code) ELSE U
            IN [Unresident(V, m) EXCEPT !.models[m].life = "unloaded"]

\* CONTRACT state.loading: only a complete pool becomes ready.
Publish(T, m) ==
    LET md == T.models[m]
        waiters == {h \in md.holders : h.wait}
        U == [T EXCEPT !.models[m].life = "ready", !.models[m].published = TRUE,
                       !.models[m].sessions = md.built, !.models[m].poolVer = md.ver, !.models[m].lastUse = T.clock,
                       !.models[m].backoff = FALSE,
                       !.models[m].holders = Running(md) \cup
                            {[h EXCEPT !.wait = FALSE, !.ver = md.ver] : h \in waiters},
                       !.out = @ \o SetToSeq({[kind |-> "Grant", ticket |-> h.id, ver |-> md.ver] : h \in waiters})]
    IN IF HasMgr(md) /\ md.step = "load" THEN ManagerDone(U, m, "Done", "ok") ELSE U

NextClone(T, m) ==
    LET md == T.models[m] IN
    IF md.built < md.cfg.slots
    THEN Emit([T EXCEPT !.models[m].job = "clone"], [kind |-> "StartClone", model |-> m, index |-> md.built])
    ELSE Publish(T, m)

Commit1(T, m, cfg) ==
    LET md == T.models[m] IN
    [T EXCEPT !.models[m].cfg = cfg, !.models[m].ver = md.ver + 1,
              !.models[m].poolVer = IF md.published THEN md.ver + 1 ELSE md.poolVer]

ManagedLoad(T, m) ==
    IF T.models[m].life = "ready" THEN ManagerDone(T, m, "Done", "ok")
    ELSE StartLoad([T EXCEPT !.models[m].step = "load"], m)

\* Retire the old pool first, then commit the complete new config and load.
Replace(T, m, cfg) ==
    IF T.models[m].published
    THEN [Retire([T EXCEPT !.models[m].step = "teardown_old"], m, "reconfigure")
              EXCEPT !.models[m].life = "reconfiguring"]
    ELSE [StartLoad([Commit1(T, m, cfg) EXCEPT !.models[m].step = "load"], m)
              EXCEPT !.models[m].life = "reconfiguring"]

\* CONTRACT fail.capacity-probe, fail.after-commit: validate first; unchanged session
\* inputs reuse the live capacity; changed multi-slot ones are probed.
Apply(T, m, cfg) ==
    LET md == T.models[m] IN
    IF cfg = md.cfg THEN ManagedLoad(T, m)
    ELSE IF SameSessions(cfg, md.cfg) /\ cfg.slots = md.cfg.slots /\ cfg.mem = md.cfg.mem
    THEN ManagedLoad(Commit1(T, m, cfg), m)
    ELSE IF cfg.slots > 1 /\ ~(md.published /\ SameSessions(cfg, md.cfg))
    THEN Emit([T EXCEPT !.models[m].step = "probe", !.models[m].life = "reconfiguring", !.models[m].job = "probe"],
              [kind |-> "StartProbe", model |-> m, cfg |-> cfg])
    ELSE IF cfg.slots > 1 /\ cfg.slots > md.capacity
    THEN ManagerDone(T, m, "Reject", "invalid_request")
    ELSE Replace(T, m, cfg)

\* A granted manager ends a load backoff (CONTRACT fail.load-backoff).
GrantManager(T, m, e) ==
    LET U == [T EXCEPT !.models[m].mgr = e, !.models[m].step = "none", !.models[m].backoff = FALSE] IN
    IF e.op = "load" THEN ManagedLoad(U, m)
    ELSE IF e.op = "unload" /\ U.models[m].life = "unloaded" THEN ManagerDone(U, m, "Done", "ok")
    ELSE IF e.op = "unload" THEN Retire([U EXCEPT !.models[m].step = "unload"], m, "unload")
    ELSE IF e.op = "unregister" /\ U.models[m].life = "unloaded" THEN Tombstone(ManagerDone(U, m, "Done", "ok"), m)
    ELSE IF e.op = "unregister" THEN Retire([U EXCEPT !.models[m].step = "unregister"], m, "unload")
    ELSE Apply(U, m, e.cfg)

Admit(T, m, id, sq) ==
    LET md == T.models[m] IN
    IF md.life = "ready"
    THEN Emit([T EXCEPT !.models[m].holders = @ \cup {[id |-> id, wait |-> FALSE, ver |-> md.poolVer, seq |-> sq]}],
              [kind |-> "Grant", ticket |-> id, ver |-> md.poolVer])
    ELSE IF md.life = "unloaded" /\ md.backoff
    THEN Emit(T, Ans("Reject", id, "server_busy")) \* CONTRACT fail.load-backoff
    ELSE LET U == [T EXCEPT !.models[m].holders = @ \cup {[id |-> id, wait |-> TRUE, ver |-> 0, seq |-> sq]}]
         IN IF md.life = "unloaded" THEN StartLoad(U, m) ELSE U

-----------------------------------------------------------------------------
(* Internal actions: they run after every event until none is enabled.     *)

PumpEnabled(T, m) ==
    LET md == T.models[m] IN
    /\ md.queue # <<>>
    /\ ~HasMgr(md)
    /\ IF Head(md.queue).kind = "req"
       THEN Admittable(md) /\ Active(md) < md.cfg.slots
       ELSE Active(md) = 0 /\ md.job = "none" /\ ~InLoaders(T, m) /\ md.life \in {"unloaded", "ready"}

\* The head of m's FIFO moves: a request takes a spare slot (never past a
\* waiting manager: it is the head); a manager or bulk barrier is granted
\* once every earlier lease drained.
PumpF(T, m) ==
    LET e == Head(T.models[m].queue)
        U == [T EXCEPT !.models[m].queue = Tail(@)]
    IN IF e.kind = "req" THEN Admit(U, m, e.id, e.seq) ELSE GrantManager(U, m, e)

Pump(m) == settling /\ PumpEnabled(S, m) /\ Commit(PumpF(S, m)) /\ UNCHANGED settling

\* Residency: count and memory after the pools already tearing down and the
\* victims V are gone.
Fits(T, mb, afterRetiring, V) ==
    LET keep == {m \in ModelIds : T.models[m].resident /\ m \notin V /\
                                  ~(afterRetiring /\ T.models[m].job = "teardown")}
    IN /\ (MaxLoaded = 0 \/ Cardinality(keep) + 1 <= MaxLoaded)
       /\ (MemoryBudget = 0 \/ SumResMB(T, keep) + mb <= MemoryBudget)

Candidates(T, h) == {x \in ModelIds : x # h /\ T.models[x].resident /\ Evictable(T, x)}

LoaderEnabled(T) ==
    /\ T.loaders # <<>>
    /\ ~(SerializeColdLoads /\ Loads(T) > 0)
    /\ LET h == Head(T.loaders) mb == T.models[h].cfg.mem IN
       Fits(T, mb, FALSE, {}) \/ ~Fits(T, mb, TRUE, {})

StartHead(T) ==
    LET h == Head(T.loaders) md == T.models[h] IN
    Emit([T EXCEPT !.loaders = Tail(@), !.models[h].resident = TRUE, !.models[h].resMB = md.cfg.mem,
                   !.models[h].built = 0, !.models[h].capacity = 0, !.models[h].job = "load"],
         [kind |-> "StartLoad", model |-> h, ver |-> md.ver, cfg |-> md.cfg])

RECURSIVE RetireAll(_, _, _)
RetireAll(T, V, cause) ==
    IF V = {} THEN T ELSE LET x == CHOOSE x \in V : TRUE IN RetireAll(Retire(T, x, cause), V \ {x}, cause)

\* Victims for the loader head h, least recently used first, until it fits
\* once they and the pools already tearing down are gone; {} when even all
\* candidates are not enough (CONTRACT res.victim-choice, res.no-victim).
RECURSIVE Victims(_, _, _, _)
Victims(T, h, mb, V) ==
    IF Fits(T, mb, TRUE, V) THEN V
    ELSE LET C == Candidates(T, h) \ V IN
         IF C = {} THEN {}
         ELSE Victims(T, h, mb, V \cup {CHOOSE x \in C : \A y \in C : T.models[x].lastUse <= T.models[y].lastUse})

\* CONTRACT res.loader-fifo, res.retiring-counts: the head starts when it
\* fits; waits while pools tearing down will make room; otherwise idle
\* victims are evicted, or, with none, its load is refused server_busy.
LoaderStep ==
    /\ settling
    /\ LoaderEnabled(S)
    /\ LET h == Head(loaders) mb == models[h].cfg.mem V == Victims(S, h, mb, {}) IN
       IF Fits(S, mb, FALSE, {}) THEN Commit(StartHead(S))
       ELSE IF V # {} THEN Commit(RetireAll(S, V, "evict"))
       ELSE Commit(FailLoad([S EXCEPT !.loaders = Tail(@)], h, "server_busy", 0))
    /\ UNCHANGED settling

ShutdownRetireEnabled(T, m) ==
    T.shutdown /\ Settled(T, m) /\ T.models[m].life = "ready" /\ T.models[m].queue = <<>>

\* During shutdown a settled ready model is torn down once unused.
ShutdownRetire(m) ==
    settling /\ ShutdownRetireEnabled(S, m) /\ Commit(Retire(S, m, "shutdown")) /\ UNCHANGED settling

CompleteShutdownEnabled(T) ==
    T.shutdown /\ ~T.sent /\ LiveTickets(T) = 0 /\ Jobs(T) = 0 /\ T.loaders = <<>> /\
    \A m \in ModelIds : ~T.models[m].resident

\* Nothing is admitted, running or resident any more.
CompleteShutdown ==
    /\ settling
    /\ CompleteShutdownEnabled(S)
    /\ Commit(Emit([S EXCEPT !.sent = TRUE], [kind |-> "ShutdownComplete"]))
    /\ UNCHANGED settling

InternalEnabled ==
    \/ \E m \in ModelIds : PumpEnabled(S, m) \/ ShutdownRetireEnabled(S, m)
    \/ LoaderEnabled(S)
    \/ CompleteShutdownEnabled(S)

Internal ==
    \/ \E m \in ModelIds : Pump(m)
    \/ LoaderStep
    \/ \E m \in ModelIds : ShutdownRetire(m)
    \/ CompleteShutdown

\* The event's settling ends when no internal action is enabled.
Quiesce == settling /\ ~InternalEnabled /\ settling' = FALSE /\ UNCHANGED <<models, order, loaders, bulks,
           shutdown, shutdownSent, seq, nextId, clock, out, evicted>>

-----------------------------------------------------------------------------
(* Event actions, named as core's events.  Each starts from a quiescent    *)
(* state, clears the effect history and leaves the state settling.          *)

Event(T) == ~settling /\ Commit(T) /\ settling' = TRUE

NewTicket(T) == [T EXCEPT !.nextId = @ + 1, !.seq = @ + 1]

\* CONTRACT order.*, time.queue-limit.  overdue: every occupied slot is overdue, a
\* matter of time the spec leaves open (CONTRACT time.overdue-blockers).
SubmitRequest(m, timeout, overdue) ==
    LET T == NewTicket(Fresh) id == T.nextId md == T.models[m] IN
    Event(
      IF ~md.reg \/ T.shutdown
      THEN Emit(T, Ans("Reject", id, IF T.shutdown THEN "shutting_down" ELSE "not_found"))
      ELSE IF md.queue = <<>> /\ ~HasMgr(md) /\ Admittable(md) /\ Active(md) < md.cfg.slots
      THEN Admit(T, m, id, T.seq)
      ELSE IF md.cfg.maxq > 0 /\ QueuedRequests(md) >= md.cfg.maxq
      THEN Emit(T, Ans("Reject", id, "server_busy"))
      ELSE IF overdue /\ Bounded(md, timeout) /\ Active(md) > 0
      THEN Emit(T, Ans("Reject", id, "server_busy"))
      ELSE [T EXCEPT !.models[m].queue = Append(@, [id |-> id, kind |-> "req", op |-> "none", cfg |-> "none",
                                                    bounded |-> Bounded(md, timeout), bulk |-> 0, seq |-> T.seq])])

\* CONTRACT reg.new, reg.invalid, time.manager-timeout; registration publishes
\* one stable entry before its first load.  A registration of an ID that was
\* unregistered reuses its tombstone and starts past its last version
\* (CONTRACT unreg.re-register); an unregister is a barrier like an unload
\* (CONTRACT unreg.barrier).
SubmitManager(m, op, cfg, timeout, overdue, rst) ==
    LET T == NewTicket(Fresh) id == T.nextId md == T.models[m]
        R == IF md.reg THEN T
             ELSE [T EXCEPT !.models[m] = [Unregistered EXCEPT !.reg = TRUE, !.cfg = cfg,
                                                              !.ver = IF rst.base > md.ver + 1 THEN rst.base
                                                                      ELSE md.ver + 1],
                            !.order = IF m \in Range(@) THEN @ ELSE Append(@, m)]
        \* A registration loads; a restored unloaded one is granted like an
        \* unload (nothing to tear down). A reconfigure ignores rst.
        op2 == IF md.reg THEN op ELSE IF rst.only THEN "unload" ELSE "load"
        bnd == Bounded(R.models[m], IF md.reg THEN timeout ELSE 0)
    IN Event(
      IF (op = "apply" /\ ~ValidConfig(cfg)) \/ op \notin {"apply", "load", "unload", "unregister"}
      THEN Emit(T, Ans("Reject", id, "invalid_request"))
      ELSE IF T.shutdown THEN Emit(T, Ans("Reject", id, "shutting_down"))
      ELSE IF ~md.reg /\ op # "apply" THEN Emit(T, Ans("Reject", id, "not_found"))
      ELSE IF overdue /\ md.reg /\ bnd /\ Active(md) > 0 THEN Emit(T, Ans("Reject", id, "server_busy"))
      ELSE [R EXCEPT !.models[m].queue = Append(@, [id |-> id, kind |-> "mgr", op |-> op2,
                                                    cfg |-> IF op2 = "apply" THEN cfg ELSE "none",
                                                    bounded |-> bnd, bulk |-> 0, seq |-> T.seq])])

\* CONTRACT order.bulk-then-bulk: a registry snapshot, then every member's barrier
\* published in this one step; unknown IDs go to not_found; no deadline.
SubmitBulkUnload(sel) ==
    LET T == NewTicket(Fresh) id == T.nextId
        known == {m \in Range(sel) : T.models[m].reg}
        ms == SetToSeq(known)
        RECURSIVE Enq(_, _)
        Enq(U, k) == IF k > Len(ms) THEN U
                     ELSE Enq([U EXCEPT !.seq = @ + 1,
                                        !.models[ms[k]].queue = Append(@, [id |-> 0, kind |-> "member", op |-> "unload",
                                                                            cfg |-> "none", bounded |-> FALSE,
                                                                            bulk |-> id, seq |-> U.seq + 1])], k + 1)
    IN Event(
      IF T.shutdown THEN Emit(T, Ans("Reject", id, "shutting_down"))
      ELSE IF known = {} THEN Emit(T, [kind |-> "Done", ticket |-> id, code |-> "ok"])
      ELSE Enq([T EXCEPT !.bulks = Append(@, [id |-> id, reason |-> "none"])], 1))

\* A queued ticket leaves holding nothing; a disconnected request waiting
\* for its pool gives its slot back (a queued request may take it and the
\* pending load); a disconnected bulk withdraws its barriers.  Cancelling
\* anything else changes nothing.
CancelF(T, t, r) ==
    LET code == IF r = "timeout" THEN "server_busy" ELSE "cancelled"
        hits == {x \in QueuedAt(T) : T.models[x[1]].queue[x[2]].id = t /\ T.models[x[1]].queue[x[2]].kind # "member"}
        waits == {m \in ModelIds : \E h \in T.models[m].holders : h.id = t /\ h.wait}
    IN
    IF hits # {} /\ (r = "disconnect" \/ LET x == CHOOSE x \in hits : TRUE IN T.models[x[1]].queue[x[2]].bounded)
    THEN LET x == CHOOSE x \in hits : TRUE
         IN Emit([T EXCEPT !.models[x[1]].queue = RemoveAt(@, x[2])], Ans("Reject", t, code))
    ELSE IF r = "disconnect" /\ waits # {}
    THEN LET m == CHOOSE m \in waits : TRUE
             U == Emit([T EXCEPT !.models[m].holders = {h \in @ : h.id # t}], Ans("Reject", t, code))
             RECURSIVE PumpAll(_)
             PumpAll(X) == IF PumpEnabled(X, m) THEN PumpAll(PumpF(X, m)) ELSE X
             V == PumpAll(U)
         IN IF WaitInit(V.models[m]) = 0 /\ ~HasMgr(V.models[m]) /\ InLoaders(V, m) THEN WithdrawLoad(V, m) ELSE V
    ELSE IF r = "disconnect" /\ \E k \in DOMAIN T.bulks : T.bulks[k].id = t
    THEN LET k == CHOOSE k \in DOMAIN T.bulks : T.bulks[k].id = t
             U == [T EXCEPT !.bulks[k].reason = "disconnect",
                            !.models = [m \in ModelIds |-> [T.models[m] EXCEPT !.queue =
                                           SelectSeq(@, LAMBDA e : ~(e.kind = "member" /\ e.bulk = t))]]]
         IN BulkCheck(U, t)
    ELSE T

Cancel(t, r) == Event(CancelF(Fresh, t, r))

\* A running request's lease ends (its answer was written, failed, or its
\* stream was dropped).  Releasing anything else changes nothing.
Release(t, failed) ==
    LET T == Fresh IN
    Event([T EXCEPT !.models = [m \in ModelIds |->
                                   IF \E h \in T.models[m].holders : h.id = t /\ ~h.wait
                                   THEN [T.models[m] EXCEPT !.holders = {h \in @ : h.id # t}, !.lastUse = T.clock]
                                   ELSE T.models[m]]])

ClearJob(T, m) == [T EXCEPT !.models[m].job = "none"]

\* The primary opened with an advertised capacity, or failed; too small a
\* capacity never publishes (CONTRACT fail.initial-load, mode.slot-capacity).
LoadDone(m, capacity, failed) ==
    /\ models[m].job = "load"
    /\ LET T == ClearJob(Fresh, m) IN
       Event(IF failed THEN FailLoad(T, m, "backend_error", 0)
             ELSE IF capacity < models[m].cfg.slots
             THEN FailLoad([T EXCEPT !.models[m].capacity = capacity], m, "invalid_request", 1)
             ELSE NextClone([T EXCEPT !.models[m].capacity = capacity, !.models[m].built = 1], m))

\* One more private session, or the private pool dies whole.
CloneDone(m, failed) ==
    /\ models[m].job = "clone"
    /\ LET T == ClearJob(Fresh, m) IN
       Event(IF failed THEN FailLoad(T, m, "backend_error", models[m].built)
             ELSE NextClone([T EXCEPT !.models[m].built = @ + 1], m))

\* The private probe reports the replacement's capacity; failure keeps the
\* old state whole (CONTRACT fail.capacity-probe).
ProbeDone(m, capacity, failed) ==
    /\ models[m].job = "probe"
    /\ LET cfg == models[m].mgr.cfg
           T == [ClearJob(Fresh, m) EXCEPT !.models[m].life = IF models[m].published THEN "ready" ELSE "unloaded"]
       IN Event(IF failed THEN ManagerDone(T, m, "Reject", "backend_error")
                ELSE IF capacity < cfg.slots THEN ManagerDone(T, m, "Reject", "invalid_request")
                ELSE Replace(T, m, cfg))

\* A pool is gone and its memory free; an unload finishes, an unregister
\* leaves a tombstone, a reconfigure commits its complete new config and
\* loads it.
TeardownDone(m) ==
    /\ models[m].job = "teardown"
    /\ LET T == [Unresident(ClearJob(Fresh, m), m) EXCEPT !.models[m].life = "unloaded", !.models[m].cause = "none"]
           md == models[m]
       IN Event(CASE HasMgr(md) /\ md.step = "unload" -> ManagerDone(T, m, "Done", "ok")
                  [] HasMgr(md) /\ md.step = "unregister" -> Tombstone(ManagerDone(T, m, "Done", "ok"), m)
                  [] HasMgr(md) /\ md.step = "fail_teardown" -> ManagerDone(T, m, "Reject", md.failCode)
                  [] HasMgr(md) /\ md.step = "teardown_old" ->
                       [StartLoad([Commit1(T, m, md.mgr.cfg) EXCEPT !.models[m].step = "load"], m)
                           EXCEPT !.models[m].life = "reconfiguring"]
                  [] OTHER -> T)

\* Time passed: queued tickets past their deadline (any of those with one)
\* are rejected server_busy; load backoffs (any of them) end; idle,
\* queue-free ready models (any of them) retire.  Which ones is a matter
\* of time.
Tick(expire, idle, ended) ==
    LET T0 == Fresh
        T == [T0 EXCEPT !.models = [m \in ModelIds |->
                                      [T0.models[m] EXCEPT !.backoff = @ /\ m \notin ended]]]
        expirable == {T.models[x[1]].queue[x[2]].id :
                         x \in {y \in QueuedAt(T) : T.models[y[1]].queue[y[2]].bounded /\
                                                    T.models[y[1]].queue[y[2]].kind # "member"}}
        U == [T EXCEPT !.models = [m \in ModelIds |->
                                     [T.models[m] EXCEPT !.queue = SelectSeq(@, LAMBDA e : e.id \notin expire)]],
                       !.out = @ \o SetToSeq({Ans("Reject", t, "server_busy") : t \in expire})]
    IN
    /\ expire \subseteq expirable
    /\ \A m \in ended : T0.models[m].backoff
    /\ \A m \in idle : Evictable(U, m) /\ IdleRetire /\ ~U.shutdown
    /\ Event(RetireAll(U, idle, "idle"))

\* Stop admitting: every queued ticket is rejected shutting_down; admitted
\* work and granted managers finish; then pools retire and
\* ShutdownComplete follows.  Repeating it changes nothing.
BeginShutdown ==
    LET T == Fresh
        queued == QueuedAt(T)
        answers == {Ans("Reject", T.models[x[1]].queue[x[2]].id, "shutting_down") :
                        x \in {y \in queued : T.models[y[1]].queue[y[2]].kind # "member"}}
        hit == {T.models[x[1]].queue[x[2]].bulk : x \in {y \in queued : T.models[y[1]].queue[y[2]].kind = "member"}}
        U == [T EXCEPT !.shutdown = TRUE, !.out = @ \o SetToSeq(answers),
                       !.models = [m \in ModelIds |-> [T.models[m] EXCEPT !.queue = <<>>]],
                       !.bulks = [k \in DOMAIN T.bulks |-> IF T.bulks[k].id \in hit /\ T.bulks[k].reason = "none"
                                                          THEN [T.bulks[k] EXCEPT !.reason = "shutdown"]
                                                          ELSE T.bulks[k]]]
    IN Event(IF T.shutdown THEN T ELSE BulkCheckAll(U, {T.bulks[k].id : k \in DOMAIN T.bulks}))

-----------------------------------------------------------------------------
(* The next-state relation, fairness and the specification.               *)

Live(T) == {h.id : h \in UNION {T.models[m].holders : m \in ModelIds}}
             \cup {T.models[x[1]].queue[x[2]].id : x \in QueuedAt(T)}
             \cup {T.bulks[k].id : k \in DOMAIN T.bulks}
Timeouts == {NoTimeout, 0, 1}

Next ==
    \/ \E m \in ModelIds, to \in Timeouts, od \in BOOLEAN : SubmitRequest(m, to, od)
    \/ \E m \in ModelIds, op \in {"apply", "load", "unload", "unregister"}, c \in Configs, to \in Timeouts, od \in BOOLEAN,
          rs \in Restores :
           SubmitManager(m, op, c, to, od, rs)
    \/ \E sel \in BulkSelections : SubmitBulkUnload(sel)
    \/ \E t \in Live(S), r \in Reasons : Cancel(t, r)
    \/ \E t \in Live(S), f \in BOOLEAN : Release(t, f)
    \/ \E m \in ModelIds, c \in Capacities, f \in BOOLEAN : LoadDone(m, c, f)
    \/ \E m \in ModelIds, f \in BOOLEAN : CloneDone(m, f)
    \/ \E m \in ModelIds, c \in Capacities, f \in BOOLEAN : ProbeDone(m, c, f)
    \/ \E m \in ModelIds : TeardownDone(m)
    \/ \E x \in SUBSET Live(S), y \in SUBSET ModelIds, z \in SUBSET ModelIds : Tick(x, y, z)
    \/ BeginShutdown
    \/ Internal
    \/ Quiesce

\* Finite backend work completes, granted requests are released, and an
\* event's settling runs to the end (weak fairness).  Submissions, cancels,
\* timeouts, ticks and shutdown are the environment's choice: not fair.
Fairness ==
    /\ \A t \in TicketIds : WF_vars(\E f \in BOOLEAN : Release(t, f))
    /\ \A m \in ModelIds : WF_vars(\E c \in Capacities, f \in BOOLEAN : LoadDone(m, c, f))
    /\ \A m \in ModelIds : WF_vars(\E f \in BOOLEAN : CloneDone(m, f))
    /\ \A m \in ModelIds : WF_vars(\E c \in Capacities, f \in BOOLEAN : ProbeDone(m, c, f))
    /\ \A m \in ModelIds : WF_vars(TeardownDone(m))
    /\ WF_vars(Internal)
    /\ WF_vars(Quiesce)

Spec == Init /\ [][Next]_vars /\ Fairness

-----------------------------------------------------------------------------
(* Invariants, named as core.Invariants; each holds in quiescent states.   *)

Quiescent == ~settling

\* Slot counts are 1..16; admitted requests never exceed the configured
\* slots; a published pool never exceeds its advertised capacity.
CapacityBounds == Quiescent =>
    \A m \in Registered(S) : LET md == models[m] IN
        /\ md.cfg.slots \in 1..MaxSlots
        /\ Active(md) <= md.cfg.slots
        /\ md.published => md.capacity >= md.sessions

\* A granted manager owns its model alone; requests hold slots only of a
\* ready or loading model.
ManagerExclusivity == Quiescent =>
    \A m \in Registered(S) : LET md == models[m] IN
        /\ HasMgr(md) => Active(md) = 0
        /\ Active(md) > 0 => md.life \in {"ready", "loading"}

\* No admitted request arrived after a manager still waiting in the FIFO.
NoBarging == Quiescent =>
    \A m \in Registered(S) : LET md == models[m] IN
        \A i \in DOMAIN md.queue : md.queue[i].kind # "req" => \A h \in md.holders : h.seq < md.queue[i].seq

\* The FIFO is in arrival order; every admitted request arrived before
\* every request still queued.
FIFOAdmission == Quiescent =>
    \A m \in Registered(S) : LET md == models[m] IN
        /\ \A i, j \in DOMAIN md.queue : i < j => md.queue[i].seq < md.queue[j].seq
        /\ \A i \in DOMAIN md.queue : md.queue[i].kind = "req" => \A h \in md.holders : h.seq < md.queue[i].seq

\* Only a complete pool is published, a ready model has one, only a ready
\* or (probing) reconfiguring model keeps one, running requests run on it.
NoPartialPool == Quiescent =>
    \A m \in Registered(S) : LET md == models[m] IN
        /\ md.life = "ready" => md.published
        /\ md.published => md.life \in {"ready", "reconfiguring"}
        /\ md.published => md.sessions = md.cfg.slots /\ md.built = md.sessions
        /\ ~md.published => md.sessions = 0
        /\ md.built <= md.cfg.slots
        /\ Running(md) # {} => md.published

\* The published pool was built from the committed config and every running
\* request is bound to it: never a partial mix.
MetadataConsistent == Quiescent =>
    \A m \in Registered(S) : LET md == models[m] IN
        /\ md.published => md.poolVer = md.ver
        /\ \A h \in Running(md) : h.ver = md.ver

\* A model is resident exactly while it has sessions; the limits hold.
ResidencyLimit == Quiescent =>
    /\ \A m \in ModelIds : models[m].resident <=>
           (models[m].published \/ models[m].job \in {"load", "clone", "teardown"})
    /\ MaxLoaded = 0 \/ Cardinality({m \in ModelIds : models[m].resident}) <= MaxLoaded
    /\ MemoryBudget = 0 \/ SumResMB(S, {m \in ModelIds : models[m].resident}) <= MemoryBudget

\* The ledger is in range: a resident pool charges 0..MaxMemoryMB, a model
\* that is not resident charges nothing, and the total is within the budget.
\* (Integers do not wrap here; the Go transcription and core check the same
\* with arithmetic that cannot overflow an int64.)
LedgerBounds == Quiescent =>
    /\ \A m \in ModelIds : IF models[m].resident THEN models[m].resMB \in 0..MaxMemoryMB
                                               ELSE models[m].resMB = 0
    /\ MemoryBudget = 0 \/ SumResMB(S, {m \in ModelIds : models[m].resident}) \in 0..MemoryBudget

\* Eviction and idle retirement took only published, idle, queue-free models.
EvictOnlyIdle == Quiescent =>
    \A e \in evicted : e.active = 0 /\ e.queued = 0 /\ ~e.mgr /\ e.published

\* Every live ticket is in one place; requests waiting for a pool have one
\* being built; every bulk has a barrier left and every barrier a bulk.
LeaseConservation == Quiescent =>
    /\ \A m \in Registered(S) : WaitInit(models[m]) > 0 =>
           models[m].job \in {"load", "clone"} \/ InLoaders(S, m)
    /\ \A k \in DOMAIN bulks : MembersOf(S, bulks[k].id) # {}
    /\ \A x \in QueuedAt(S) : models[x[1]].queue[x[2]].kind = "member" =>
           \E k \in DOMAIN bulks : bulks[k].id = models[x[1]].queue[x[2]].bulk
    /\ \A m \in ModelIds : ~HasMgr(models[m]) => models[m].step = "none"

\* An unregistered entry (unknown, or a tombstone) holds nothing: no
\* ticket, lease, job, pool or residency charge can point at it (CONTRACT
\* unreg.tombstone).
TombstoneEmpty == Quiescent =>
    \A m \in ModelIds \ Registered(S) : LET md == models[m] IN
        /\ md.life = "unloaded" /\ ~md.published /\ md.holders = {} /\ md.queue = <<>>
        /\ ~HasMgr(md) /\ md.job = "none" /\ ~md.resident /\ ~InLoaders(S, m) /\ md.step = "none"

\* Work-conserving: no FIFO head the contract would admit or grant waits,
\* and the loader head does not wait for residency that is free.
QueueProgress == Quiescent =>
    /\ \A m \in ModelIds : ~PumpEnabled(S, m)
    /\ (loaders # <<>> /\ ~(SerializeColdLoads /\ Loads(S) > 0)) =>
           ~Fits(S, models[Head(loaders)].cfg.mem, FALSE, {})

Invariants ==
    /\ CapacityBounds
    /\ ManagerExclusivity
    /\ NoBarging
    /\ FIFOAdmission
    /\ NoPartialPool
    /\ MetadataConsistent
    /\ ResidencyLimit
    /\ LedgerBounds
    /\ EvictOnlyIdle
    /\ LeaseConservation
    /\ QueueProgress
    /\ TombstoneEmpty

-----------------------------------------------------------------------------
(* Liveness under Fairness (checked by TLC as PROPERTIES; spec/mc checks   *)
(* the same bounded: no reachable state without a fair continuation, and   *)
(* no reachable cycle, in which a ticket waits).                           *)

Waits(t) ==
    \/ \E x \in QueuedAt(S) : models[x[1]].queue[x[2]].id = t
    \/ \E m \in ModelIds : \E h \in models[m].holders : h.id = t /\ h.wait
    \/ \E m \in ModelIds : models[m].mgr.id = t
    \/ \E k \in DOMAIN bulks : bulks[k].id = t

\* Every queued request is eventually admitted or rejected (timeouts are
\* not needed), every manager eventually granted and finished, and
\* overlapping bulk unloads never deadlock.
EveryTicketServed == \A t \in TicketIds : Waits(t) ~> ~Waits(t)

\* Shutdown drains finite work and completes.
ShutdownCompletes == shutdown ~> shutdownSent

=============================================================================
