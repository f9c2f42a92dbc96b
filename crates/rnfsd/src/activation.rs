//! systemd socket activation (sd_listen_fds(3)): listening sockets the
//! service manager opened for us (packaging/rnfsd.socket) serve NFS and
//! MOUNT instead of binding `server.listen`, so the port is open before
//! the server starts and stays open across its restarts.

use std::net::TcpListener;
use std::os::fd::AsRawFd;

/// The listening TCP sockets passed to this process (LISTEN_PID is ours),
/// or none when it was not socket-activated.
pub fn listeners() -> Result<Vec<TcpListener>, String> {
    let fds = crate::sys::listen_fds().map_err(|e| format!("socket activation: {e}"))?;
    let mut v = Vec::with_capacity(fds.len());
    for fd in fds {
        let fd_no = fd.as_raw_fd();
        let l = TcpListener::from(fd);
        let tcp = l.local_addr().is_ok();
        let listening = rustix::net::sockopt::socket_acceptconn(&l).unwrap_or(false);
        if !tcp || !listening {
            return Err(format!(
                "socket activation: descriptor {fd_no} is not a listening TCP socket \
                 (rnfsd.socket needs ListenStream= lines only)"
            ));
        }
        v.push(l);
    }
    Ok(v)
}
