//! The per-item stage: takes items from its input queue, runs the op with bounded concurrency,
//! restores input order if asked, and passes outputs (and skips) on.
//!
//! Blocking ops run in "lanes" on the worker pool: a lane is one pool job that keeps taking
//! this stage's queued items until none is left, so a busy stage costs one channel hand-off
//! per item rather than one job submission. At most `concurrency` lanes run at once, and the
//! stage admits up to `2 x concurrency` items, so a lane finds the next item already waiting.
//! Async ops are polled inside the stage's own task, `concurrency` at a time.
//!
//! A streaming op ([`Op::flat_map_iter`](super::Op::flat_map_iter)) is a stream per call,
//! polled in the stage's task like an async op: each step (making the iterator, each `next()`)
//! is one job on the worker pool, and the stage asks for the next output only while its outbox
//! has room, so a call never holds a worker while the stages downstream are backed up.

use std::collections::{BTreeMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, SelectAll, StreamExt};
use futures_util::FutureExt;
use tokio::sync::mpsc;
use tracing::Instrument;

use super::stream::BoxStream;
use super::{Ids, Msg, Op, OpKind, Order, Outputs, PartIter, StreamingFn};
use crate::error::{Error, ErrorKind};
use crate::exec::lanes::{IsClosed, Lanes, Work};
use crate::exec::pool::Submitter;
use crate::exec::queue::{Busy, QueueRx, QueueTx};
use crate::stage::account::{self, Account};
use crate::stage::fused::{self, Batch, Control, Direct};

/// One finished task: its ticket (input sequence in this stage), positions, outcome, duration.
struct Done<U> {
    ticket: u64,
    ids: Ids,
    outcome: Result<Outputs<U>, Error>,
    took: Duration,
}

/// Where a lane's results go.
enum Report<U> {
    /// Back to the stage's task, which settles them (`MapStage::settle`).
    Engine(mpsc::UnboundedSender<Done<U>>),
    /// The stage heads a fused group: the lane settles the call itself, then runs the fused
    /// stages after it.
    Fused(Account, Direct<U>),
}

impl<U> Report<U> {
    fn closed(&self) -> bool {
        match self {
            Report::Engine(results) => results.is_closed(),
            Report::Fused(_, next) => next.group.closed(),
        }
    }
}

impl<U: Send + 'static> Report<U> {
    /// What a lane does with one item: run the op, then hand the outcome on; `false` when the
    /// stage's task is gone (shutdown).
    fn lane_work<T: Send + 'static>(
        self,
        op: Arc<super::BlockingFn<T, U>>,
        stage: Arc<str>,
    ) -> (Work<(u64, Ids, T)>, IsClosed) {
        let report = Arc::new(self);
        let closed = {
            let report = report.clone();
            Box::new(move || report.closed())
        };
        let work = Box::new(move |(ticket, ids, item): (u64, Ids, T)| {
            let _span = tracing::trace_span!("op", stage = %stage).entered();
            let (outcome, took) = account::call(&*op, item);
            match &*report {
                Report::Engine(results) => {
                    let sent = results
                        .send(Done {
                            ticket,
                            ids,
                            outcome,
                            took,
                        })
                        .is_ok();
                    crate::exec::lanes::reported();
                    sent
                }
                Report::Fused(account, next) => {
                    let mut items = Vec::new();
                    fused::settle(account, &next.group, &ids, took, outcome, &mut items);
                    (next.run)(Batch::of_call(ticket, ids, items));
                    true
                }
            }
        });
        (work, closed)
    }
}

enum Exec<T, U> {
    Blocking {
        lanes: Arc<Lanes<(u64, Ids, T)>>,
        results: mpsc::UnboundedReceiver<Done<U>>,
    },
    Async {
        op: Arc<super::AsyncFn<T, U>>,
        running: FuturesUnordered<super::BoxFuture<Done<U>>>,
        stage: Arc<str>,
    },
    Streaming {
        op: Arc<StreamingFn<T, U>>,
        /// One stream per call: its `Part`s, then its final `Done`.
        running: SelectAll<BoxStream<Done<U>>>,
        submitter: Submitter,
        stage: Arc<str>,
    },
}

/// Where a streaming call is between two steps.
enum Step<T, U> {
    Start(T),
    Next(PartIter<U>),
}

/// The result of one step on the worker: an output and the iterator to go on with, the end
/// (`None`), or the call's failure.
type StepResult<U> = Result<Option<(PartIter<U>, U)>, Error>;

/// One streaming call as a stream: `Part`s as the iterator yields them, then one `Done` with
/// `Streamed(n)` or the failure (and the call's positions and summed step time).
fn streaming_call<T: Send + 'static, U: Send + 'static>(
    op: Arc<StreamingFn<T, U>>,
    submitter: Submitter,
    stage: Arc<str>,
    ticket: u64,
    ids: Ids,
    item: T,
) -> BoxStream<Done<U>> {
    struct Call<T, U> {
        step: Option<Step<T, U>>,
        ids: Ids,
        sent: u64,
        took: Duration,
    }
    let call = Call {
        step: Some(Step::Start(item)),
        ids,
        sent: 0,
        took: Duration::ZERO,
    };
    Box::pin(futures_util::stream::unfold(call, move |mut call| {
        let op = op.clone();
        let submitter = submitter.clone();
        let stage = stage.clone();
        async move {
            let step = call.step.take()?;
            let (tx, rx) = tokio::sync::oneshot::channel::<(StepResult<U>, Duration)>();
            let job = move || {
                let _span = tracing::trace_span!("op", stage = %stage).entered();
                let start = Instant::now();
                let r = std::panic::catch_unwind(AssertUnwindSafe(move || {
                    let mut it = match step {
                        Step::Start(item) => op(item).map_err(super::op_error)?,
                        Step::Next(it) => it,
                    };
                    match it.next() {
                        None => Ok(None),
                        Some(Ok(u)) => Ok(Some((it, u))),
                        Some(Err(e)) => Err(super::op_error(e)),
                    }
                }));
                let r = r.unwrap_or_else(|p| {
                    Err(Error::new(ErrorKind::OpPanicked, super::panic_message(p)))
                });
                let _ = tx.send((r, start.elapsed()));
            };
            if !submitter.submit(job) {
                return None; // the pool is gone: the pipeline is stopping
            }
            let (r, took) = rx.await.ok()?;
            call.took += took;
            let (outcome, ids, took) = match r {
                Ok(Some((it, u))) => {
                    call.step = Some(Step::Next(it));
                    call.sent += 1;
                    (Ok(Outputs::Part(u)), Ids::None, Duration::ZERO)
                }
                Ok(None) => (
                    Ok(Outputs::Streamed(call.sent)),
                    std::mem::take(&mut call.ids),
                    call.took,
                ),
                Err(e) => (Err(e), std::mem::take(&mut call.ids), call.took),
            };
            let done = Done {
                ticket,
                ids,
                outcome,
                took,
            };
            Some((done, call))
        }
    }))
}

impl<T: Send + 'static, U: Send + 'static> Exec<T, U> {
    /// `fused`: the stage heads a fused group (a blocking op only): its lanes settle each call
    /// with this accounting and hand the outputs to the fused stages.
    fn new(
        op: Op<T, U>,
        concurrency: usize,
        submitter: Submitter,
        stage: Arc<str>,
        fused: Option<(Account, Direct<U>)>,
    ) -> Self {
        match op.kind {
            OpKind::Blocking(op) => {
                let (res_tx, res_rx) = mpsc::unbounded_channel();
                let report = match fused {
                    Some((account, next)) => Report::Fused(account, next),
                    None => Report::Engine(res_tx),
                };
                let (work, closed) = report.lane_work(op, stage);
                Exec::Blocking {
                    lanes: Lanes::new(concurrency, submitter, work, closed),
                    results: res_rx,
                }
            }
            OpKind::Async(op) => Exec::Async {
                op,
                running: FuturesUnordered::new(),
                stage,
            },
            OpKind::Streaming(op) => Exec::Streaming {
                op,
                running: SelectAll::new(),
                submitter,
                stage,
            },
        }
    }

    /// Whether the op passes outputs on while a call runs (`Op::flat_map_iter`).
    fn streams(&self) -> bool {
        matches!(self, Exec::Streaming { .. })
    }

    /// Items the stage may hold (running, queued for a lane, or waiting to be passed on).
    fn admit_limit(&self, concurrency: usize) -> usize {
        match self {
            Exec::Blocking { .. } => 2 * concurrency,
            Exec::Async { .. } | Exec::Streaming { .. } => concurrency,
        }
    }

    fn submit(&mut self, ticket: u64, ids: Ids, item: T) -> bool {
        match self {
            Exec::Blocking { lanes, .. } => lanes.push((ticket, ids, item)),
            Exec::Async { op, running, stage } => {
                let fut = op(item).instrument(tracing::trace_span!("op", stage = %stage));
                running.push(Box::pin(async move {
                    let start = Instant::now();
                    let outcome = match AssertUnwindSafe(fut).catch_unwind().await {
                        Ok(r) => r.map_err(super::op_error),
                        Err(p) => Err(Error::new(ErrorKind::OpPanicked, super::panic_message(p))),
                    };
                    Done {
                        ticket,
                        ids,
                        outcome,
                        took: start.elapsed(),
                    }
                }));
                true
            }
            Exec::Streaming {
                op,
                running,
                submitter,
                stage,
            } => {
                running.push(streaming_call(
                    op.clone(),
                    submitter.clone(),
                    stage.clone(),
                    ticket,
                    ids,
                    item,
                ));
                true
            }
        }
    }

    /// A finished task if one is ready now. Only lanes report through a channel that can be
    /// read without waiting; async and streaming calls are polled by [`Exec::next_done`].
    fn try_next_done(&mut self) -> Option<Done<U>> {
        match self {
            Exec::Blocking { results, .. } => results.try_recv().ok(),
            Exec::Async { .. } | Exec::Streaming { .. } => None,
        }
    }

    async fn next_done(&mut self) -> Option<Done<U>> {
        match self {
            Exec::Blocking { results, .. } => results.recv().await,
            Exec::Async { running, .. } => running.next().await,
            Exec::Streaming { running, .. } => running.next().await,
        }
    }
}

/// Messages produced by one finished task (several for a flat-map).
enum Settled<U> {
    One(Msg<U>),
    Many(Vec<Msg<U>>),
}

/// A per-item stage, ready to run.
pub(crate) struct MapStage<T, U> {
    exec: Exec<T, U>,
    concurrency: usize,
    order: Order,
    account: Account,
}

impl<T: Send + 'static, U: Send + 'static> MapStage<T, U> {
    /// A stage of its own (`next: None`), or the head of a fused group whose next stages are
    /// `next` (a blocking op only; see [`fused`]).
    pub(crate) fn new(
        op: Op<T, U>,
        concurrency: usize,
        order: Order,
        account: Account,
        submitter: Submitter,
        next: Option<Direct<U>>,
    ) -> Self {
        let stage = Arc::from(account.meter.name());
        let fused = next.map(|next| (account.clone(), next));
        let exec = Exec::new(op, concurrency, submitter, stage, fused);
        MapStage {
            exec,
            concurrency,
            order,
            account,
        }
    }

    /// The head of a fused group: admits items while the group holds less than the admission
    /// limit, numbers them (tickets restore input order at the tail) and hands them to the
    /// lanes, which run every fused stage; skips and epoch markers go straight to the tail.
    /// Ends when the input closes (the lanes finish what was admitted) or the tail ends.
    pub(crate) async fn run_head(mut self, mut input: QueueRx<Msg<T>>, next: Direct<U>) {
        let limit = self.exec.admit_limit(self.concurrency) + next.admits;
        let ordered = self.order == Order::Input;
        let group = next.group.clone();
        let mut ticket: u64 = 0;
        loop {
            if group.closed() {
                return;
            }
            if group.stopped() || self.account.failures.aborted() {
                // A budget was exceeded: what was admitted still drains downstream.
                input.close();
                return;
            }
            let can_take = !group.epoch_ending() && group.held() < limit;
            let msg = if can_take {
                match input.try_recv() {
                    Ok(msg) => Some(msg),
                    Err(Busy::Closed) => return,
                    Err(Busy::Wait(())) => tokio::select! {
                        msg = input.recv() => match msg {
                            Some(msg) => Some(msg),
                            None => return,
                        },
                        () = group.stop_or_close() => None,
                    },
                }
            } else {
                group.room(limit).await;
                None
            };
            let Some(msg) = msg else { continue };
            group.admit();
            match msg {
                Msg::Item(ids, item) => {
                    self.account.meter.on_input();
                    if !self.exec.submit(ticket, ids, item) {
                        return;
                    }
                }
                Msg::Skip(ids) => (next.control)(ticket, Control::Skip(ids)),
                Msg::EndOfEpoch => {
                    if !ordered {
                        group.end_epoch();
                    }
                    (next.control)(ticket, Control::EndOfEpoch);
                }
            }
            ticket += 1;
        }
    }

    /// Turns a finished task into the messages to pass on, recording stats and failures.
    /// Returns them and whether a failure budget is now exceeded.
    fn settle(&self, done: Done<U>) -> (Settled<U>, bool) {
        let (outputs, exceeded) = self.account.record(&done.ids, done.took, done.outcome);
        let settled = match outputs {
            Some(Outputs::One(u)) => Settled::One(Msg::Item(done.ids, u)),
            Some(Outputs::Many(v)) => Settled::Many(account::messages(v, done.ids)),
            // The outputs went on as they were made; the position follows them.
            Some(Outputs::Streamed(_)) => Settled::Many(account::messages(Vec::new(), done.ids)),
            _ => Settled::One(Msg::Skip(done.ids)),
        };
        (settled, exceeded)
    }

    /// Runs until the input closes (or a budget is exceeded) and everything admitted has been
    /// passed on, or until the output closes (shutdown).
    ///
    /// Outputs wait in an outbox while the output queue is full, and the stage keeps taking
    /// input and running ops meanwhile, up to its admission limit: a full queue downstream
    /// stops a stage only once it holds `limit` items.
    ///
    /// Each wake-up first does all the work that needs no waiting (every finished task, every
    /// queued input it may admit, every output the next queue has room for), so a busy stage
    /// costs the scheduler thread one wake-up per burst of items rather than one per item.
    pub(crate) async fn run(mut self, mut input: QueueRx<Msg<T>>, output: QueueTx<Msg<U>>) {
        let mut flow = Flow::new(
            self.exec.admit_limit(self.concurrency),
            self.order == Order::Input,
            self.exec.streams(),
        );
        loop {
            // Everything that needs no waiting, until nothing moves.
            loop {
                let mut moved = false;
                while flow.wants_done() {
                    let Some(done) = self.exec.try_next_done() else {
                        break;
                    };
                    self.on_done(&mut flow, &mut input, done);
                    moved = true;
                }
                match output.try_send_from(&mut flow.outbox) {
                    Ok(sent) => moved |= sent,
                    Err(_) => return,
                }
                while flow.can_take() {
                    match input.try_recv() {
                        Ok(msg) => {
                            if !self.on_input(&mut flow, msg) {
                                return;
                            }
                        }
                        Err(Busy::Wait(())) => break,
                        Err(Busy::Closed) => flow.input_open = false,
                    }
                    moved = true;
                }
                if !moved {
                    break;
                }
            }
            if flow.input_open && self.account.failures.aborted() {
                // Another stage exceeded the pipeline budget: stop taking input here too.
                input.close();
                flow.input_open = false;
            }
            let can_take = flow.can_take();
            let wants_done = flow.wants_done();
            tokio::select! {
                biased;
                sent = output.send_first_of(&mut flow.outbox), if !flow.outbox.is_empty() => {
                    if sent.is_err() {
                        return;
                    }
                }
                done = self.exec.next_done(), if wants_done => {
                    let Some(done) = done else { return };
                    self.on_done(&mut flow, &mut input, done);
                }
                msg = input.recv(), if can_take => match msg {
                    Some(msg) => {
                        if !self.on_input(&mut flow, msg) {
                            return;
                        }
                    }
                    None => flow.input_open = false,
                },
                else => return,
            }
        }
    }

    /// One finished task (or one output of a streaming call) into the flow.
    fn on_done(&self, flow: &mut Flow<U>, input: &mut QueueRx<Msg<T>>, done: Done<U>) {
        let ticket = done.ticket;
        let done = match done.outcome {
            Ok(Outputs::Part(u)) => {
                self.account.meter.on_output(1);
                if flow.ordered && ticket != flow.next_out {
                    flow.parts.entry(ticket).or_default().push(u);
                } else {
                    flow.outbox.push_back(Msg::Item(Ids::None, u));
                }
                return;
            }
            outcome => Done { outcome, ..done },
        };
        flow.running -= 1;
        let (mut settled, exceeded) = self.settle(done);
        if let Some(earlier) = flow.parts.remove(&ticket) {
            settled = settled.after_parts(earlier);
        }
        if exceeded {
            // Upstream stops; what was admitted still drains downstream.
            input.close();
            flow.input_open = false;
        }
        if flow.ordered {
            flow.ready.insert(ticket, settled);
        } else {
            settled.push_to(&mut flow.outbox);
        }
        flow.release_ready();
    }

    /// One input message into the flow; `false` once the worker pool is gone (shutdown).
    fn on_input(&mut self, flow: &mut Flow<U>, msg: Msg<T>) -> bool {
        match msg {
            Msg::Item(ids, item) => {
                self.account.meter.on_input();
                if !self.exec.submit(flow.next_ticket, ids, item) {
                    return false;
                }
                flow.next_ticket += 1;
                flow.running += 1;
            }
            Msg::Skip(ids) => {
                if flow.ordered {
                    flow.ready
                        .insert(flow.next_ticket, Settled::One(Msg::Skip(ids)));
                    flow.next_ticket += 1;
                } else {
                    flow.outbox.push_back(Msg::Skip(ids));
                }
            }
            // In input order the marker takes a ticket and the stage goes on taking the next
            // epoch's items (no drain at the boundary); in completion order it waits for the
            // items before it, so none of the next epoch overtakes it.
            Msg::EndOfEpoch if flow.ordered => {
                flow.ready
                    .insert(flow.next_ticket, Settled::One(Msg::EndOfEpoch));
                flow.next_ticket += 1;
            }
            Msg::EndOfEpoch => flow.epoch_ending = true,
        }
        flow.release_ready();
        true
    }
}

/// What a running stage holds between events: tickets, results waiting for their turn in input
/// order, outputs waiting for room downstream.
struct Flow<U> {
    /// Items the stage may hold (running, waiting in order, or in the outbox).
    limit: usize,
    ordered: bool,
    /// The op streams its outputs (`Op::flat_map_iter`): asked for more only while the outbox
    /// has room.
    streams: bool,
    /// Tickets number the stage's input (items, skips, markers) so input order can be restored.
    next_ticket: u64,
    next_out: u64,
    ready: BTreeMap<u64, Settled<U>>,
    outbox: VecDeque<Msg<U>>,
    /// A streaming op's outputs of calls not yet next in input order, by ticket.
    parts: BTreeMap<u64, Vec<U>>,
    running: usize,
    input_open: bool,
    /// An end-of-epoch marker (completion order) waits for the items admitted before it.
    epoch_ending: bool,
}

impl<U> Flow<U> {
    fn new(limit: usize, ordered: bool, streams: bool) -> Self {
        Flow {
            limit,
            ordered,
            streams,
            next_ticket: 0,
            next_out: 0,
            ready: BTreeMap::new(),
            outbox: VecDeque::new(),
            parts: BTreeMap::new(),
            running: 0,
            input_open: true,
            epoch_ending: false,
        }
    }

    fn can_take(&self) -> bool {
        let held = self.running + self.ready.len() + self.outbox.len();
        self.input_open && !self.epoch_ending && held < self.limit
    }

    fn wants_done(&self) -> bool {
        self.running > 0 && (!self.streams || self.outbox.len() < self.limit)
    }

    /// Moves whatever is next in input order to the outbox, and the end-of-epoch marker once
    /// the items before it are out.
    fn release_ready(&mut self) {
        while let Some(settled) = self.ready.remove(&self.next_out) {
            self.next_out += 1;
            settled.push_to(&mut self.outbox);
        }
        // The call now next in input order streams straight to the outbox from here on.
        if let Some(earlier) = self.parts.remove(&self.next_out) {
            self.outbox
                .extend(earlier.into_iter().map(|u| Msg::Item(Ids::None, u)));
        }
        if self.epoch_ending && self.running == 0 && self.ready.is_empty() {
            self.outbox.push_back(Msg::EndOfEpoch);
            self.epoch_ending = false;
        }
    }
}

impl<U> Settled<U> {
    /// These messages preceded by a streaming call's outputs that waited for their turn.
    fn after_parts(self, earlier: Vec<U>) -> Settled<U> {
        let mut msgs: Vec<Msg<U>> = earlier
            .into_iter()
            .map(|u| Msg::Item(Ids::None, u))
            .collect();
        match self {
            Settled::One(m) => msgs.push(m),
            Settled::Many(ms) => msgs.extend(ms),
        }
        Settled::Many(msgs)
    }

    fn push_to(self, outbox: &mut VecDeque<Msg<U>>) {
        match self {
            Settled::One(m) => outbox.push_back(m),
            Settled::Many(ms) => outbox.extend(ms),
        }
    }
}
