//! A loopback TCP relay in front of the apiserver, one per replica, which can cut that replica off.
//!
//! Each replica's kubeconfig points at its own relay. TLS passes through untouched (the apiserver's
//! certificate names `127.0.0.1`, whatever the port). [`Relay::cut`] aborts every relayed connection at
//! once, dropping whatever bytes it still held, and closes the listening socket, so new connections are
//! refused; [`Relay::restore`] listens again on the same port. [`Relay::delay`] forwards what the
//! replica sends only after a delay, so that its requests are in flight for a while; [`Relay::hold`]
//! stops forwarding it at all, without dropping anything, until the hold ends. Together they make a
//! frozen process's in-flight writes: sent inside its term, delivered after it. The other replicas,
//! with relays of their own, do not notice.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;

enum Command {
    Cut(oneshot::Sender<usize>),
    Restore(oneshot::Sender<anyhow::Result<()>>),
}

/// A running relay. Dropping it stops it and closes its connections.
#[derive(Debug)]
pub struct Relay {
    port: u16,
    commands: mpsc::Sender<Command>,
    accepted: Arc<AtomicUsize>,
    late: Arc<AtomicUsize>,
    mode: watch::Sender<Mode>,
    task: tokio::task::JoinHandle<()>,
}

/// How the relay forwards what replicas send.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Mode {
    /// How long each chunk waits before it is forwarded.
    delay: Duration,
    /// Forward nothing (keep everything) while set.
    held: bool,
    /// Sabotage, for the verdicts' positive controls: what was held is dropped at the release instead
    /// of delivered.
    discard_held: bool,
}

impl Relay {
    /// Listens on a free loopback port and relays every connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding a relay port")?;
        let port = listener.local_addr()?.port();
        let (commands, rx) = mpsc::channel(4);
        let accepted = Arc::new(AtomicUsize::new(0));
        let late = Arc::new(AtomicUsize::new(0));
        let (mode, modes) = watch::channel(Mode::default());
        let task = tokio::spawn(serve(
            listener,
            port,
            upstream,
            rx,
            accepted.clone(),
            Flow {
                modes,
                late: late.clone(),
            },
        ));
        Ok(Relay {
            port,
            commands,
            accepted,
            late,
            mode,
            task,
        })
    }

    /// Holds (`true`) or releases (`false`) what the replica sends: while held, nothing it sends is
    /// forwarded to the apiserver, and nothing is dropped. What the apiserver sends still flows.
    pub fn hold(&self, on: bool) {
        self.mode.send_modify(|m| m.held = on);
    }

    /// Sabotage for the verdicts' positive controls: from now on, what a hold kept is dropped when it
    /// ends instead of delivered (so nothing arrives late).
    pub fn discard_held(&self) {
        self.mode.send_modify(|m| m.discard_held = true);
    }

    /// How many chunks the replica sent that a hold kept and then delivered, so far: what reached the
    /// apiserver late.
    pub fn delivered_late(&self) -> usize {
        self.late.load(Ordering::Relaxed)
    }

    /// Forwards each chunk the replica sends `delay` after it arrived (in order; zero: at once).
    pub fn delay(&self, delay: Duration) {
        self.mode.send_modify(|m| m.delay = delay);
    }

    /// The port replicas connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// How many connections it has accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Cuts the replica off: aborts every open connection and stops listening (new connections are
    /// refused). Returns how many connections were cut.
    pub async fn cut(&self) -> anyhow::Result<usize> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Cut(tx))
            .await
            .context("the relay has stopped")?;
        rx.await.context("the relay has stopped")
    }

    /// Listens again on the same port.
    pub async fn restore(&self) -> anyhow::Result<()> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Restore(tx))
            .await
            .context("the relay has stopped")?;
        rx.await.context("the relay has stopped")?
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    listener: TcpListener,
    port: u16,
    upstream: SocketAddr,
    mut commands: mpsc::Receiver<Command>,
    accepted: Arc<AtomicUsize>,
    flow: Flow,
) {
    let mut listener = Some(listener);
    let mut conns: JoinSet<()> = JoinSet::new();
    loop {
        tokio::select! {
            cmd = commands.recv() => match cmd {
                None => return,
                Some(Command::Cut(done)) => {
                    listener = None;
                    let n = conns.len();
                    conns.abort_all();
                    while conns.join_next().await.is_some() {}
                    let _ = done.send(n);
                }
                Some(Command::Restore(done)) => {
                    let result = match listener {
                        Some(_) => Ok(()),
                        None => TcpListener::bind(("127.0.0.1", port))
                            .await
                            .with_context(|| format!("listening again on relay port {port}"))
                            .map(|l| listener = Some(l)),
                    };
                    let _ = done.send(result);
                }
            },
            conn = accept(listener.as_ref()) => {
                if let Ok((client, _)) = conn {
                    accepted.fetch_add(1, Ordering::Relaxed);
                    conns.spawn(relay(client, upstream, flow.clone()));
                }
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn accept(listener: Option<&TcpListener>) -> std::io::Result<(TcpStream, SocketAddr)> {
    match listener {
        Some(l) => l.accept().await,
        None => std::future::pending().await,
    }
}

/// What every connection of a relay shares: the forwarding mode, and the count of chunks delivered late.
#[derive(Clone)]
struct Flow {
    modes: watch::Receiver<Mode>,
    late: Arc<AtomicUsize>,
}

async fn relay(client: TcpStream, upstream: SocketAddr, flow: Flow) {
    let Flow { mut modes, late } = flow;
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    // The client's chunks, stamped with their arrival, go through a queue so that reading never
    // waits for a delay or a hold (which apply to forwarding only).
    let (chunks, mut queue) = mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let read = async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = client_read.read(&mut buf).await {
            if n == 0
                || chunks
                    .send((tokio::time::Instant::now(), buf[..n].to_vec()))
                    .is_err()
            {
                break;
            }
        }
    };
    let forward = async move {
        'chunks: while let Some((arrived, chunk)) = queue.recv().await {
            let mut was_held = false;
            let discard = loop {
                let mode = *modes.borrow_and_update();
                was_held |= mode.held;
                let due = arrived + mode.delay;
                if !mode.held && tokio::time::Instant::now() >= due {
                    break was_held && mode.discard_held;
                }
                let wait = async {
                    if mode.held {
                        std::future::pending::<()>().await;
                    }
                    tokio::time::sleep_until(due).await;
                };
                tokio::select! {
                    () = wait => {}
                    changed = modes.changed() => if changed.is_err() { break 'chunks },
                }
            };
            if discard {
                continue;
            }
            if server_write.write_all(&chunk).await.is_err() {
                break;
            }
            if was_held {
                late.fetch_add(1, Ordering::Relaxed);
            }
        }
        let _ = server_write.shutdown().await;
    };
    let down = async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::join!(read, forward, down);
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn echo() -> anyhow::Result<SocketAddr> {
        let echo = TcpListener::bind("127.0.0.1:0").await?;
        let upstream = echo.local_addr()?;
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        Ok(upstream)
    }

    #[tokio::test]
    async fn holds_without_dropping() -> anyhow::Result<()> {
        let relay = Relay::start(echo().await?).await?;
        let mut a = TcpStream::connect(("127.0.0.1", relay.port())).await?;
        a.write_all(b"ping").await?;
        let mut buf = [0u8; 4];
        a.read_exact(&mut buf).await?;
        relay.hold(true);
        a.write_all(b"late").await?;
        let early = tokio::time::timeout(Duration::from_millis(300), a.read_exact(&mut buf)).await;
        assert!(early.is_err(), "nothing passes a hold");
        relay.hold(false);
        tokio::time::timeout(Duration::from_secs(5), a.read_exact(&mut buf)).await??;
        assert_eq!(&buf, b"late", "what was held arrives when the hold ends");
        assert_eq!(
            relay.delivered_late(),
            1,
            "the held chunk is counted as delivered late"
        );

        relay.delay(Duration::from_millis(400));
        let sent = std::time::Instant::now();
        a.write_all(b"slow").await?;
        tokio::time::timeout(Duration::from_secs(5), a.read_exact(&mut buf)).await??;
        assert_eq!(&buf, b"slow");
        assert!(
            sent.elapsed() >= Duration::from_millis(400),
            "{:?}",
            sent.elapsed()
        );
        Ok(())
    }

    #[tokio::test]
    async fn a_sabotaged_hold_delivers_nothing_late() -> anyhow::Result<()> {
        let relay = Relay::start(echo().await?).await?;
        relay.discard_held();
        let mut a = TcpStream::connect(("127.0.0.1", relay.port())).await?;
        relay.hold(true);
        a.write_all(b"lost").await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
        relay.hold(false);
        a.write_all(b"next").await?;
        let mut buf = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(5), a.read_exact(&mut buf)).await??;
        assert_eq!(&buf, b"next", "what was held is dropped, what follows flows");
        assert_eq!(relay.delivered_late(), 0);
        Ok(())
    }

    #[tokio::test]
    async fn relays_cuts_and_restores() -> anyhow::Result<()> {
        let echo = TcpListener::bind("127.0.0.1:0").await?;
        let upstream = echo.local_addr()?;
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        let relay = Relay::start(upstream).await?;
        let addr = ("127.0.0.1", relay.port());
        let mut a = TcpStream::connect(addr).await?;
        a.write_all(b"ping").await?;
        let mut buf = [0u8; 4];
        a.read_exact(&mut buf).await?;
        assert_eq!(&buf, b"ping");

        assert_eq!(relay.cut().await?, 1);
        // The open connection is closed, and new ones are refused.
        let n = a.read(&mut buf).await.unwrap_or(0);
        assert_eq!(n, 0);
        assert!(TcpStream::connect(addr).await.is_err());

        relay.restore().await?;
        let mut b = TcpStream::connect(addr).await?;
        b.write_all(b"pong").await?;
        b.read_exact(&mut buf).await?;
        assert_eq!(&buf, b"pong");
        assert_eq!(relay.accepted(), 2);
        Ok(())
    }
}
