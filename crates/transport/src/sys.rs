//! The transport's thin syscall module: its only `unsafe`.
//! - TCP receive: `recv` straight into a record's reserved room, and
//!   SO_RCVLOWAT (the event loop's large-fragment wait).
//! - UDP: the destination address of datagrams on a wildcard socket
//!   (IP_PKTINFO, IPV6_RECVPKTINFO), and replies sent from it: a UDP server
//!   bound to 0.0.0.0 must answer from the address the client wrote to (a
//!   client on a connected socket ignores anything else), and the port
//!   mapper reports addresses the client can reach from it, as rpcbind does.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;

/// Where a datagram was sent to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dst {
    pub ip: IpAddr,
    ifindex: u32,
}

/// Ask the kernel for each datagram's destination address.
pub(crate) fn enable(s: &UdpSocket, v6: bool) -> io::Result<()> {
    let (level, opt) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO)
    } else {
        (libc::IPPROTO_IP, libc::IP_PKTINFO)
    };
    setsockopt_int(s, level, opt, 1)
}

fn setsockopt_int(
    s: &impl AsRawFd,
    level: libc::c_int,
    opt: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: a valid fd and a c_int option of the right size.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            opt,
            (&v as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// SO_RCVLOWAT: bytes the socket must hold before it polls readable.
pub(crate) fn set_rcvlowat(s: &impl AsRawFd, bytes: usize) -> io::Result<()> {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    setsockopt_int(s, libc::SOL_SOCKET, libc::SO_RCVLOWAT, v)
}

/// One `recv` of at most `max` bytes into `v`'s spare capacity (no
/// zeroing first, no copy through another buffer); returns the bytes
/// appended, 0 at end of stream.
pub(crate) fn recv_append(s: &impl AsRawFd, v: &mut Vec<u8>, max: usize) -> io::Result<usize> {
    if v.capacity() - v.len() < max {
        v.reserve(max); // not when the record's room was reserved up front
    }
    let spare = v.spare_capacity_mut();
    let len = spare.len().min(max);
    // SAFETY: the kernel writes at most `len` bytes into `v`'s spare
    // capacity, which has at least that many.
    let n = unsafe { libc::recv(s.as_raw_fd(), spare.as_mut_ptr().cast(), len, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    // SAFETY: recv initialized the first `n` (<= len) bytes of the spare
    // capacity.
    unsafe { v.set_len(v.len() + n) };
    Ok(n)
}

/// Room for one IPV6_PKTINFO (the larger) control message, aligned.
#[repr(C, align(8))]
struct Control([u8; 64]);

fn to_socket_addr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match libc::c_int::from(ss.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says it holds a sockaddr_in.
            let a: &libc::sockaddr_in = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says it holds a sockaddr_in6.
            let a: &libc::sockaddr_in6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                u32::from_be(a.sin6_flowinfo),
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// `recv_from`, plus the destination address when the kernel gave it.
pub(crate) fn recv(s: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, Option<Dst>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut from: libc::sockaddr_storage = unsafe { zeroed() };
    let mut ctl = Control([0; 64]);
    // SAFETY: all-zero is a valid msghdr (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = (&mut from as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.0.as_mut_ptr().cast();
    msg.msg_controllen = ctl.0.len() as _;
    // SAFETY: msg points at live buffers of the lengths given.
    let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let peer = to_socket_addr(&from)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "recvmsg: no peer address"))?;
    let mut dst = None;
    // SAFETY: the CMSG_* walk stays within msg_controllen, as filled in by
    // the kernel; each payload is read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let h = &*c;
            if h.cmsg_level == libc::IPPROTO_IP && h.cmsg_type == libc::IP_PKTINFO {
                let p: libc::in_pktinfo = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                dst = Some(Dst {
                    ip: IpAddr::V4(Ipv4Addr::from(u32::from_be(p.ipi_addr.s_addr))),
                    ifindex: p.ipi_ifindex as u32,
                });
            } else if h.cmsg_level == libc::IPPROTO_IPV6 && h.cmsg_type == libc::IPV6_PKTINFO {
                let p: libc::in6_pktinfo = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                dst = Some(Dst {
                    ip: IpAddr::V6(Ipv6Addr::from(p.ipi6_addr.s6_addr)),
                    ifindex: p.ipi6_ifindex,
                });
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, peer, dst))
}

/// `send_to` from the address `dst` names (v4 as IP_PKTINFO's
/// `ipi_spec_dst`; v6, and v4-mapped on a v6 socket, as IPV6_PKTINFO).
pub(crate) fn send(s: &UdpSocket, data: &[u8], peer: SocketAddr, dst: &Dst) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut to: libc::sockaddr_storage = unsafe { zeroed() };
    let to_len = match peer {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage has room and alignment for it.
            let sin = unsafe { &mut *(&mut to as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from(*a.ip()).to_be();
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            // SAFETY: as above.
            let sin6 = unsafe { &mut *(&mut to as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            sin6.sin6_flowinfo = a.flowinfo().to_be();
            sin6.sin6_scope_id = a.scope_id();
            size_of::<libc::sockaddr_in6>()
        }
    };
    let mut ctl = Control([0; 64]);
    // SAFETY: all-zero is a valid msghdr (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = (&mut to as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = to_len as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.0.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE of a pktinfo fits the 64-byte buffer; the header
    // and payload are written within it.
    unsafe {
        let (level, ty, len) = match (dst.ip, peer) {
            (IpAddr::V4(_), SocketAddr::V4(_)) => (
                libc::IPPROTO_IP,
                libc::IP_PKTINFO,
                size_of::<libc::in_pktinfo>(),
            ),
            _ => (
                libc::IPPROTO_IPV6,
                libc::IPV6_PKTINFO,
                size_of::<libc::in6_pktinfo>(),
            ),
        };
        msg.msg_controllen = libc::CMSG_SPACE(len as u32) as _;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = level;
        (*c).cmsg_type = ty;
        (*c).cmsg_len = libc::CMSG_LEN(len as u32) as _;
        match dst.ip {
            IpAddr::V4(ip) if ty == libc::IP_PKTINFO => {
                let mut p: libc::in_pktinfo = zeroed();
                p.ipi_spec_dst.s_addr = u32::from(ip).to_be();
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast(), p);
            }
            ip => {
                let v6 = match ip {
                    IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                    IpAddr::V6(v6) => v6,
                };
                let mut p: libc::in6_pktinfo = zeroed();
                p.ipi6_addr.s6_addr = v6.octets();
                p.ipi6_ifindex = dst.ifindex;
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast(), p);
            }
        }
    }
    // SAFETY: msg points at live buffers of the lengths given.
    let n = unsafe { libc::sendmsg(s.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}
