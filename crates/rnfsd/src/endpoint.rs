//! What the two small local endpoints (the admin socket and the metrics
//! listener) share: an accept thread that stops on a flag, and a lingering
//! close.

use std::io::{self, Read};
use std::net::{Shutdown, TcpStream};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Pause after a failed accept (EMFILE would otherwise spin the thread).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Bytes and time a lingering close waits for the client's unread request.
const LINGER_BYTES: u64 = 64 * 1024;
const LINGER_TIME: Duration = Duration::from_millis(200);

/// A thread accepting connections on a listener (`spawn_accept_loop`);
/// `stop` (or drop) ends it.
pub(crate) struct AcceptLoop {
    stop: Arc<AtomicBool>,
    /// The listener (a duplicate of the thread's descriptor).
    listener: OwnedFd,
    thread: Option<JoinHandle<()>>,
}

impl AcceptLoop {
    /// Sets the flag and shuts the listener down, which makes a blocked
    /// accept(2) fail (EINVAL, for TCP and Unix sockets alike), then joins
    /// the thread. No connection of our own is needed to wake it, so a
    /// socket file removed under a running server (a cleaned /run, a
    /// state directory deleted) cannot hang the server's exit.
    pub fn stop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.store(true, Ordering::Release);
            let _ = rustix::net::shutdown(&self.listener, rustix::net::Shutdown::Both);
            let _ = t.join();
        }
    }
}

impl Drop for AcceptLoop {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Run `accept` in a thread named `name`, handing each connection to
/// `on_conn`, until [`AcceptLoop::stop`]; `listener` is a duplicate of the
/// descriptor `accept` waits on.
pub(crate) fn spawn_accept_loop<S: Send + 'static>(
    name: &str,
    listener: OwnedFd,
    mut accept: impl FnMut() -> io::Result<S> + Send + 'static,
    mut on_conn: impl FnMut(S) + Send + 'static,
) -> io::Result<AcceptLoop> {
    let what = name.to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || loop {
            let c = accept();
            if flag.load(Ordering::Acquire) {
                break;
            }
            match c {
                Ok(c) => on_conn(c),
                Err(e) => {
                    tracing::warn!("{what} accept: {e}");
                    std::thread::sleep(ACCEPT_BACKOFF);
                }
            }
        })?;
    Ok(AcceptLoop {
        stop,
        listener,
        thread: Some(thread),
    })
}

/// A stream whose write side can be shut while its read side drains.
pub(crate) trait Linger {
    fn shut_write(&self) -> io::Result<()>;
    fn read_timeout(&self, t: Duration) -> io::Result<()>;
}

impl Linger for TcpStream {
    fn shut_write(&self) -> io::Result<()> {
        self.shutdown(Shutdown::Write)
    }
    fn read_timeout(&self, t: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(t))
    }
}

impl Linger for UnixStream {
    fn shut_write(&self) -> io::Result<()> {
        self.shutdown(Shutdown::Write)
    }
    fn read_timeout(&self, t: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(t))
    }
}

/// Lingering close: closing with unread bytes would reset the answer away,
/// so shut the write side and take what the client still sends (bounded in
/// size and time).
pub(crate) fn linger_close<S: Linger>(c: &S) -> io::Result<()>
where
    for<'a> &'a S: Read,
{
    c.shut_write()?;
    c.read_timeout(LINGER_TIME)?;
    let _ = io::copy(&mut c.take(LINGER_BYTES), &mut io::sink());
    Ok(())
}
