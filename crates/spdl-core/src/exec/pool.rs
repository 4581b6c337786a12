//! A fixed-size pool of worker threads for blocking ops.
//!
//! Unlike tokio's blocking pool, its size is fixed (`num_threads`), so CPU-bound stages never
//! oversubscribe the cores. Jobs are plain closures; a job that panics is caught by the caller's
//! wrapper (see `stage::map`), so a worker never dies.

use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};

use crate::error::{Error, ErrorKind, Result};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// `num_threads` OS threads taking jobs from one queue. Dropping the pool lets every worker
/// finish its current job and joins them.
pub(crate) struct WorkerPool {
    jobs: Option<Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl WorkerPool {
    /// Starts `num_threads` workers named `{name}-{i}`.
    pub(crate) fn new(name: &str, num_threads: usize) -> Result<Self> {
        let (tx, rx): (Sender<Job>, Receiver<Job>) = crossbeam_channel::unbounded();
        let mut threads = Vec::with_capacity(num_threads);
        for i in 0..num_threads {
            let rx = rx.clone();
            let handle = std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || {
                    for job in rx {
                        job();
                    }
                })
                .map_err(|e| Error::new(ErrorKind::Stopped, format!("cannot start worker: {e}")))?;
            threads.push(handle);
        }
        Ok(WorkerPool {
            jobs: Some(tx),
            threads,
        })
    }

    /// The workers' thread ids (to tell whether a call comes from one of them).
    pub(crate) fn thread_ids(&self) -> Vec<std::thread::ThreadId> {
        self.threads.iter().map(|t| t.thread().id()).collect()
    }

    /// A handle that submits jobs to this pool.
    pub(crate) fn submitter(&self) -> Submitter {
        Submitter {
            jobs: self.jobs.clone().expect("pool is running"),
        }
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        self.jobs = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Submits jobs to a [`WorkerPool`]; cheap to clone.
#[derive(Clone)]
pub(crate) struct Submitter {
    jobs: Sender<Job>,
}

impl Submitter {
    /// Queues `job`; returns `false` if the pool has shut down.
    pub(crate) fn submit(&self, job: impl FnOnce() + Send + 'static) -> bool {
        self.jobs.send(Box::new(job)).is_ok()
    }

    /// Whether no submitted job waits for a worker.
    pub(crate) fn is_idle(&self) -> bool {
        self.jobs.is_empty()
    }
}
