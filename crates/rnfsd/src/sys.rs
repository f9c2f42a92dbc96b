//! The rnfsd crate's thin syscall module: wrappers over what the binary
//! needs that no safe crate call offers; its only `unsafe`.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// The descriptors the service manager passed for socket activation
/// (sd_listen_fds(3); none when LISTEN_PID is not ours), each owned once
/// taken from the iterator. A second call is refused: the descriptors
/// would be owned twice.
pub fn listen_fds() -> io::Result<impl ExactSizeIterator<Item = OwnedFd>> {
    static TAKEN: AtomicBool = AtomicBool::new(false);
    if TAKEN.swap(true, Ordering::SeqCst) {
        return Err(io::Error::other("listen fds already taken"));
    }
    let fds = sd_notify::listen_fds()?;
    // SAFETY: the service manager passed these descriptors to this process
    // (LISTEN_PID is ours) and nothing else here owns them; the guard above
    // hands each out only once.
    Ok(fds.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }))
}
