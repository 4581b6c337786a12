//! Groups of blocking stages: adjacent blocking stages of the same order pass items from the
//! lanes of one to the lanes of the next, without a queue or the scheduler thread in between.
//!
//! A group is a *head* (the first stage: it admits items from its input queue, numbers them
//! with tickets and hands them to its lanes), *followers* and a *tail* (the last stage's
//! outputs: restored to input order if asked and passed on, with backpressure). A follower runs
//! either inline on the lane that hands it a batch (*fused*: the same concurrency as the stage
//! before, and at least the worker count, so no parallelism is lost) or on lanes of its own, at
//! its own concurrency. The lane that finishes an item delivers it to the tail itself, which
//! passes it to the next queue while that has room; the tail's task on the scheduler only
//! waits for room when the queue is full. Per item, the scheduler thread sees one hand-off
//! (the head's admission) instead of a pair per stage.
//!
//! What stays exact: every stage keeps its own statistics (items in, outputs, filtered, failed,
//! task times), its failure budget and its name in errors; the queue between two grouped
//! stages keeps its meter (a message passes it without waiting); the order of outputs (tickets
//! of the head's input), epoch markers and backpressure (the group holds at most the sum of its
//! stages' admission limits, fewer than with queues between them). The tail passes one skip
//! per dropped source item, where unfused stages pass one per dropped intermediate output (a
//! skip with no position; so a lone blocking stage, a group of one, passes no skip for an input
//! that carried no position). After a budget stops the group, the items it had admitted still
//! go through every stage, as they drain from unfused stages; the head, which learns of the
//! stop from a lane, may have admitted one more item meanwhile.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, Notify};

use super::{Ids, Msg, Outputs};
use crate::error::Error;
use crate::exec::lanes::Lanes;
use crate::exec::pool::Submitter;
use crate::exec::queue::{QueueMeter, QueueTx};
use crate::stage::account::{self, Account};

/// What the head and the tail of a group share.
pub(crate) struct Group {
    /// Tickets admitted by the head and not yet moved to the tail's outbox.
    in_flight: AtomicUsize,
    /// Messages in the tail's outbox.
    outbox: AtomicUsize,
    /// A completion-order epoch marker waits for the items before it: the head admits no more.
    epoch_ending: AtomicBool,
    /// A fused stage exceeded its failure budget: the head takes no more input.
    stop: AtomicBool,
    /// The tail ended (its output closed): the head ends too.
    closed: AtomicBool,
    /// The head waits for room (see [`Group::room`]) below its admission limit.
    wants_room: AtomicBool,
    limit: AtomicUsize,
    /// The tail released the room the head waits for (or ended, or an epoch marker went
    /// out), or a budget stopped the group.
    room: Notify,
}

impl Group {
    fn new() -> Self {
        Group {
            in_flight: AtomicUsize::new(0),
            outbox: AtomicUsize::new(0),
            epoch_ending: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            wants_room: AtomicBool::new(false),
            limit: AtomicUsize::new(0),
            room: Notify::new(),
        }
    }

    /// Items the group holds (running, waiting for their turn, or in the tail's outbox).
    /// Never less than the truth: the tail raises `outbox` before it lowers `in_flight`
    /// (`Tail::publish`), and this reads `in_flight` first.
    pub(crate) fn held(&self) -> usize {
        let in_flight = self.in_flight.load(Ordering::Acquire);
        in_flight + self.outbox.load(Ordering::Acquire)
    }

    /// The head admitted one more ticket.
    pub(crate) fn admit(&self) {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
    }

    /// A completion-order epoch marker was admitted: no more until the tail lets it out.
    pub(crate) fn end_epoch(&self) {
        self.epoch_ending.store(true, Ordering::Release);
    }

    pub(crate) fn epoch_ending(&self) -> bool {
        self.epoch_ending.load(Ordering::Acquire)
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    pub(crate) fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The tail ended or its output closed: the head and the lanes stop.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.room.notify_one();
    }

    /// A fused stage exceeded its failure budget: the head takes no more input.
    fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.room.notify_one();
    }

    /// Waits until the group stops or closes (the head waiting for input looks at that too).
    pub(crate) async fn stop_or_close(&self) {
        self.room.notified().await
    }

    /// Waits until the group holds fewer than `limit` items (the head's admission limit) and
    /// no epoch marker holds the head back, or the group stops or closes. Only a head waiting
    /// here is woken by the tail's releases, not one waiting for input. (Waiting for more
    /// room than one item, to save wake-ups, measured no faster and would leave the group
    /// below its limit at rest, so the pipeline would hold fewer items than its bound.)
    pub(crate) async fn room(&self, limit: usize) {
        self.limit.store(limit, Ordering::Release);
        self.wants_room.store(true, Ordering::SeqCst);
        // The tail may have released the room between the head's look and the flag. The
        // fences pair with `on_release`'s: the head sees the room, or the tail sees the flag.
        fence(Ordering::SeqCst);
        if !self.has_room() {
            self.room.notified().await;
        }
        self.wants_room.store(false, Ordering::Release);
    }

    fn has_room(&self) -> bool {
        self.closed()
            || self.stopped()
            || (!self.epoch_ending() && self.held() < self.limit.load(Ordering::Acquire))
    }

    /// The tail released room or let an epoch marker out: wakes the head if it waits for it.
    fn on_release(&self) {
        fence(Ordering::SeqCst);
        if self.wants_room.load(Ordering::SeqCst)
            && self.has_room()
            && self.wants_room.swap(false, Ordering::AcqRel)
        {
            self.room.notify_one();
        }
    }
}

/// One admitted ticket's outputs of the stage before, on their way through the fused stages.
pub(crate) struct Batch<U> {
    pub(crate) ticket: u64,
    pub(crate) ids: Ids,
    pub(crate) items: Vec<U>,
    /// The messages these stood for between unfused stages: one per output, one skip per call
    /// that gave none (for the meters of the queues fusing replaced).
    pub(crate) messages: u64,
}

impl<U> Batch<U> {
    /// The batch of one call's outputs.
    pub(crate) fn of_call(ticket: u64, ids: Ids, items: Vec<U>) -> Self {
        let messages = items.len().max(1) as u64;
        Batch {
            ticket,
            ids,
            items,
            messages,
        }
    }
}

/// What the head passes to the tail without running anything.
pub(crate) enum Control {
    Skip(Ids),
    EndOfEpoch,
}

/// The fused stages after a lane's op, as the stage before them sees them (their own types are
/// hidden behind the closures).
pub(crate) struct Direct<U> {
    /// Runs the fused stages on one ticket's outputs (on the calling lane) and hands the result
    /// to the tail.
    pub(crate) run: Arc<dyn Fn(Batch<U>) + Send + Sync>,
    /// Passes a skip or an epoch marker, with its ticket, to the tail.
    pub(crate) control: Arc<dyn Fn(u64, Control) + Send + Sync>,
    pub(crate) group: Arc<Group>,
    /// Items the stages after the head may hold on lanes of their own (their admission
    /// limits): the head admits that many more.
    pub(crate) admits: usize,
}

impl<U> Clone for Direct<U> {
    fn clone(&self) -> Self {
        Direct {
            run: self.run.clone(),
            control: self.control.clone(),
            group: self.group.clone(),
            admits: self.admits,
        }
    }
}

/// One call's outputs after its accounting; an exceeded budget stops the group's input.
pub(crate) fn settle<U>(
    account: &Account,
    group: &Group,
    ids: &Ids,
    took: Duration,
    outcome: Result<Outputs<U>, Error>,
    out: &mut Vec<U>,
) {
    let (outputs, exceeded) = account.record(ids, took, outcome);
    if exceeded {
        group.stop();
    }
    match outputs {
        Some(Outputs::One(u)) => out.push(u),
        Some(Outputs::Many(v)) => out.extend(v),
        _ => {}
    }
}

/// A follower: `op` runs on each item of a batch, then the stages after it. Inline on the
/// lane that hands it the batch (`own_lanes: None`: fused), or on lanes of its own
/// (`Some((concurrency, pool))`: the stage keeps its concurrency, and its items still pass
/// from lane to lane without the scheduler thread).
pub(crate) fn follower<U: Send + 'static, V: Send + 'static>(
    op: Arc<super::BlockingFn<U, V>>,
    account: Account,
    passed: Arc<QueueMeter>,
    next: Direct<V>,
    own_lanes: Option<(usize, Submitter)>,
) -> Direct<U> {
    let admits = next.admits + own_lanes.as_ref().map_or(0, |(c, _)| 2 * c);
    let group = next.group.clone();
    let forward = next.control.clone();
    let passed_control = passed.clone();
    // Skips and markers pass this queue's place too (as they would pass the queue).
    let control = Arc::new(move |ticket: u64, c: Control| {
        passed_control.pass(1);
        forward(ticket, c);
    });
    let inline = move |batch: Batch<U>| {
        passed.pass(batch.messages);
        // Skips (calls before that gave nothing) pass this stage as they came.
        let mut messages = batch.messages - batch.items.len() as u64;
        let mut out = Vec::new();
        for item in batch.items {
            if next.group.closed() {
                break; // the pipeline is shutting down
            }
            account.meter.on_input();
            let _span = tracing::trace_span!("op", stage = %account.meter.name()).entered();
            let (outcome, took) = account::call(&*op, item);
            let before = out.len();
            settle(&account, &next.group, &batch.ids, took, outcome, &mut out);
            messages += (out.len() - before).max(1) as u64;
        }
        (next.run)(Batch {
            ticket: batch.ticket,
            ids: batch.ids,
            items: out,
            messages,
        });
    };
    let run: Arc<dyn Fn(Batch<U>) + Send + Sync> = match own_lanes {
        None => Arc::new(inline),
        Some((concurrency, pool)) => {
            let closing = group.clone();
            let lanes = Lanes::new(
                concurrency,
                pool,
                Box::new(move |batch| {
                    inline(batch);
                    true
                }),
                Box::new(move || closing.closed()),
            );
            Arc::new(move |batch| {
                // `false` only once the pool is gone: the pipeline is stopping.
                let _ = lanes.push(batch);
            })
        }
    };
    Direct {
        run,
        control,
        group,
        admits,
    }
}

/// What reaches the tail: a ticket's messages, or an epoch marker's ticket.
enum ToTail<W> {
    Ticket(u64, Vec<Msg<W>>),
    Marker(u64),
}

/// The tail of a group: its task (to spawn on the scheduler) and the entry for the stages
/// before it.
///
/// The lane that finishes a ticket delivers it itself: it puts the ticket in order and passes
/// what is next in order to the output queue, under the tail's lock, so an item reaches the
/// next stage (or the consumer) without the scheduler thread. Only when the output queue is
/// full does the tail's task take over, waiting for room on the scheduler while the lanes go
/// on adding to the outbox.
pub(crate) fn tail<W: Send + 'static>(
    ordered: bool,
    output: QueueTx<Msg<W>>,
) -> (
    Direct<W>,
    std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
) {
    let group = Arc::new(Group::new());
    let shared = Arc::new(TailShared {
        state: Mutex::new(Tail {
            ordered,
            group: group.clone(),
            ready: BTreeMap::new(),
            next_out: 0,
            settled: 0,
            marker: None,
            outbox: VecDeque::new(),
            released: 0,
        }),
        output,
        group: group.clone(),
        blocked: Notify::new(),
    });
    // Held by every entry below: when the last one is gone, nothing more will come.
    let (alive, senders_gone) = mpsc::unbounded_channel::<std::convert::Infallible>();
    let run = {
        let (shared, alive) = (shared.clone(), alive.clone());
        Arc::new(move |batch: Batch<W>| {
            let _alive = &alive;
            let msgs = account::messages(batch.items, batch.ids);
            shared.deliver(ToTail::Ticket(batch.ticket, msgs));
            crate::exec::lanes::reported();
        })
    };
    let control = {
        let shared = shared.clone();
        Arc::new(move |ticket: u64, c: Control| {
            let _alive = &alive;
            shared.deliver(match c {
                Control::Skip(ids) => ToTail::Ticket(ticket, vec![Msg::Skip(ids)]),
                Control::EndOfEpoch => ToTail::Marker(ticket),
            });
        })
    };
    let task = Box::pin(run_tail(shared, senders_gone));
    (
        Direct {
            run,
            control,
            group,
            admits: 0,
        },
        task,
    )
}

/// What the lanes, the head and the tail's task share.
struct TailShared<W> {
    state: Mutex<Tail<W>>,
    output: QueueTx<Msg<W>>,
    group: Arc<Group>,
    /// The outbox holds messages the output queue had no room for: the task waits for room.
    blocked: Notify,
}

impl<W> TailShared<W> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Tail<W>> {
        // Poisoned only by a panic in `deliver` (an item's `Drop` once the output is gone, at
        // shutdown), which closes the group.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A ticket's messages (or a marker) from a lane or the head: into order, then on.
    ///
    /// Nothing here runs user code but an item's `Drop` (a message the closed output queue
    /// handed back). Should that panic, the group closes: a lost ticket would otherwise
    /// hold every later one back, and the consumer would wait forever.
    fn deliver(&self, m: ToTail<W>) {
        let delivered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut tail = self.lock();
            tail.take(m);
            self.pass_on(&mut tail);
        }));
        if delivered.is_err() {
            self.group.close();
        }
    }

    /// Passes the outbox's messages, in order, while the output queue has room; the rest
    /// waits for the task.
    fn pass_on(&self, tail: &mut Tail<W>) {
        if self.output.try_send_from(&mut tail.outbox).is_err() {
            // The output is gone (shutdown): the head and the lanes stop.
            self.group.close();
        }
        tail.publish();
        if !tail.outbox.is_empty() {
            self.blocked.notify_one();
        }
    }
}

/// The tail's task: waits for room in the output queue whenever the lanes left messages in
/// the outbox, and ends once every entry is gone and the outbox is empty (dropping the
/// output, which closes the next queue).
async fn run_tail<W: Send + 'static>(
    shared: Arc<TailShared<W>>,
    mut senders_gone: mpsc::UnboundedReceiver<std::convert::Infallible>,
) {
    // Ended, returned or aborted with its task: the head and the lanes stop.
    let _closing = CloseOnDrop(shared.group.clone());
    let mut open = true;
    loop {
        while !shared.lock().outbox.is_empty() {
            let Ok(permit) = shared.output.reserve().await else {
                return;
            };
            let mut tail = shared.lock();
            if let Some(m) = tail.outbox.pop_front() {
                permit.send(m);
            }
            shared.pass_on(&mut tail);
        }
        if !open {
            return;
        }
        tokio::select! {
            () = shared.blocked.notified() => {}
            None = senders_gone.recv() => open = false,
        }
    }
}

/// Closes a group when dropped.
struct CloseOnDrop(Arc<Group>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

struct Tail<W> {
    ordered: bool,
    group: Arc<Group>,
    /// Input order: tickets' messages waiting for the tickets before them.
    ready: BTreeMap<u64, Vec<Msg<W>>>,
    next_out: u64,
    /// Completion order: tickets released so far, and a marker waiting for the ones before it.
    settled: u64,
    marker: Option<u64>,
    outbox: VecDeque<Msg<W>>,
    /// Tickets moved to the outbox since the last `publish`.
    released: usize,
}

impl<W> Tail<W> {
    fn take(&mut self, m: ToTail<W>) {
        let (ticket, msgs) = match m {
            ToTail::Ticket(t, msgs) => (t, msgs),
            ToTail::Marker(t) if self.ordered => (t, vec![Msg::EndOfEpoch]),
            ToTail::Marker(t) => {
                self.marker = Some(t);
                self.release_marker();
                return;
            }
        };
        if self.ordered {
            self.ready.insert(ticket, msgs);
            while let Some(msgs) = self.ready.remove(&self.next_out) {
                self.next_out += 1;
                self.release(msgs);
            }
        } else {
            self.release(msgs);
            self.release_marker();
        }
    }

    fn release(&mut self, msgs: Vec<Msg<W>>) {
        self.outbox.extend(msgs);
        self.settled += 1;
        // Counted out of `in_flight` by `publish`, once the outbox's size is published: the
        // head running meanwhile must not see the ticket in neither.
        self.released += 1;
    }

    /// In completion order the marker goes out once every ticket before it is out.
    fn release_marker(&mut self) {
        if self.marker == Some(self.settled) {
            self.marker = None;
            self.release(vec![Msg::EndOfEpoch]);
            self.group.epoch_ending.store(false, Ordering::Release);
        }
    }

    /// Tells the head how much the group holds now: the outbox first, then the tickets that
    /// left `in_flight` for it (see [`Group::held`]).
    fn publish(&mut self) {
        self.group
            .outbox
            .store(self.outbox.len(), Ordering::Release);
        let released = std::mem::take(&mut self.released);
        if released > 0 {
            self.group.in_flight.fetch_sub(released, Ordering::AcqRel);
        }
        self.group.on_release();
    }
}
