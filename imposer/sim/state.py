"""The simulation's vocabulary: what each step costs in AWS calls, the codes of events and
states, and one host's record (its parent and its receive).
"""

from __future__ import annotations

from imposer.worker.dispatch.capmemo import CapMemo
from imposer.worker.policy import NOTES_READ, RECEIVE_MAX  # noqa: F401 (re-exported)

#: AWS calls the parent makes for each step, as the worker's code makes them: each entry is
#: measured against the worker's own part at the boto3 boundary (tests/sim/test_costs.py).
CALLS = {
    "receive": 1,             # ReceiveMessage (the receiver thread's, beside the parent)
    "cap": 1,                 # the tenant's cap (GetItem), once per cap_cache_seconds a host
    "acquire": 1,             # TransactWriteItems (a paused tenant's needs none)
    "park": 1,                # the note and the job's waiting note, one TransactWriteItems
    #                           (the receive's visibility, the lease TTL, covers the window)
    "defer": 2,               # ChangeMessageVisibility, job note
    "notes": 1,               # waiting-table Query of the tenant's oldest notes (its notes
    #                           serve the host's next hand-offs of the tenant too)
    "succeeded": 5,           # release, plate HeadObject + CopyObject + DeleteObject, delete
    "failed": 2,              # release, DeleteMessage
    "retry": 3,               # job GetItem (failures so far), release, visibility
    "dead": 6,                # job GetItem, release, dead-letter claim, DLQ SendMessage,
    #                           the claim recorded sent, DeleteMessage
    "requeue": 2,             # release, visibility
    "give_back": 1,           # visibility 0: a message the receive brought beyond the slots
}
#: Events: a child ends; a message shows (sent, or back after a window); a parent's pass is
#: due; a pass goes on after its AWS calls; SQS has a receive; the long polls take what
#: showed; a long poll ends empty; a receive's answer reaches its parent; the hosts read
#: who has work waiting (the waiting view).
FINISH, VISIBLE, TICK, RESUME, SERVE, SERVE_ALL, POLL_END, ANSWER, VIEW = range(9)
#: A job's message: not visible (not sent yet, deferred, or retrying); visible; parked;
#: its job running; final.
WAITING, VISIBLE_NOW, PARKED, RUNNING, DONE = range(5)
#: The parent: waiting on its children and the receive, about to run a pass, in a pass.
IDLE, SCHEDULED, BUSY = range(3)
#: The receive: none asked; on its way to SQS; long-polling; its answer on its way back;
#: its answer waiting for the parent; empty polls one after another while the parent
#: waits with nothing owed (worked out when something happens: ``_unchain``).
RX_NONE, RX_ASKED, RX_WAIT, RX_BACK, RX_DONE, RX_CHAIN = range(6)


class Host:
    """One parent and its receive: free slots, finished children, hand-offs owed."""

    __slots__ = ("cap_read", "clock", "done", "empty", "free", "index", "looked", "memo",
                 "notes_left", "owed", "parked_seen", "parks", "rx", "rx_end", "rx_result",
                 "rx_short", "rx_token", "rx_want", "stale", "state", "token", "turn",
                 "view", "viewed")

    def __init__(self, index: int, slots: int, defer_seconds: float) -> None:
        self.index = index
        self.free = list(range(slots - 1, -1, -1))
        self.done: list[tuple[int, int, bool]] = []
        self.state = IDLE
        self.token = 0
        #: The parent's own time: busy with AWS calls until then.
        self.clock = 0.0
        #: The tenants this host takes to be at their cap without asking: the worker's
        #: own memo, on this host's clock (``monotonic``).
        self.memo = CapMemo(defer_seconds, self)
        #: The pass in progress (a generator), while the parent waits on AWS.
        self.turn = None
        #: tenant -> hand-offs owed to it (``Dispatcher._owed``), oldest tenant first.
        self.owed: dict[str, int] = {}
        #: tenant -> when this host last read its cap (``TenantStore.cap_for``'s cache).
        self.cap_read: dict[str, float] = {}
        #: ``_Fleet.shown`` when asking again could bring nothing new (-1: it could).
        self.stale = -1
        self.rx = RX_NONE
        self.rx_token = 0
        self.rx_want = 0
        #: Messages the last batch parked (``Dispatcher.last_batch_parks``).
        self.parks = 0
        self.rx_end = 0.0
        self.rx_result: list[int] = []
        #: The receive asked while a hand-off was owed: it does not wait for messages.
        self.rx_short = False
        #: tenant -> notes of this host's last Query of it not yet tried (``HandOff.notes``).
        self.notes_left: dict[str, int] = {}
        #: What a look at the queue brought (``Intake.look``), for the pass's dispatch.
        self.looked: list[int] = []
        #: tenant -> when this host last parked or read notes of it (``HandOff.parked_lately``).
        self.parked_seen: dict[str, float] = {}
        #: The last receive brought nothing this host could start (``Intake.empty_poll``).
        self.empty = False
        #: Reads of the waiting view so far, and the one the last restart acted on
        #: (``Refiller.restart_parked``: once per read).
        self.view = self.viewed = 0

    def monotonic(self) -> float:
        """The parent's own time, as the worker's parts read it (``Clock.monotonic``)."""
        return self.clock
