//! `latency-proxy LISTEN_PORT TARGET_PORT DELAY_MS`: a TCP proxy on 127.0.0.1 for the remote
//! benchmarks (`bench/shards_cache.py`). Every chunk the client sends (a request) reaches the
//! target `DELAY_MS` later, counted from when it arrived, so requests in a row are not delayed
//! more than once; answers flow back at once. One small tokio runtime (one thread), one
//! reusable buffer per direction: the proxy should cost little CPU beside the loader it
//! measures (its CPU is reported by the bench from `/proc`).
//!
//! The kernel of the bench machine has no `sch_netem`, hence a proxy rather than `tc netem`.

use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [listen, target, delay] = args.as_slice() else {
        anyhow::bail!("usage: latency-proxy LISTEN_PORT TARGET_PORT DELAY_MS");
    };
    let listen: u16 = listen.parse().context("LISTEN_PORT")?;
    let target: u16 = target.parse().context("TARGET_PORT")?;
    let delay = Duration::from_secs_f64(delay.parse::<f64>().context("DELAY_MS")? / 1000.0);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", listen)).await?;
        loop {
            let (client, _) = listener.accept().await?;
            // Detached on purpose: a connection's task ends when it closes or the process does.
            #[allow(clippy::disallowed_methods)]
            tokio::spawn(async move {
                if let Ok(server) = TcpStream::connect(("127.0.0.1", target)).await {
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    proxy(client, server, delay).await;
                }
            });
        }
    })
}

/// Client to server with `delay`, server to client as it comes, until either side closes.
async fn proxy(client: TcpStream, server: TcpStream, delay: Duration) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    // Requests are read as they come and written once due; the channel keeps their order.
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let up_read = async move {
        let mut buf = vec![0u8; 64 << 10];
        while let Ok(n) = cr.read(&mut buf).await {
            if n == 0
                || tx
                    .send((Instant::now() + delay, buf[..n].to_vec()))
                    .is_err()
            {
                break;
            }
        }
    };
    let up_write = async move {
        // Due times only grow: each chunk waits for its own, never for the ones before.
        while let Some((due, data)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if sw.write_all(&data).await.is_err() {
                return;
            }
        }
        let _ = sw.shutdown().await;
    };
    let down = async move {
        let mut buf = vec![0u8; 256 << 10];
        while let Ok(n) = sr.read(&mut buf).await {
            if n == 0 || cw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = cw.shutdown().await;
    };
    tokio::join!(up_read, up_write, down);
}
