//! The arbiter's wire: one JSON object per line over a Unix stream socket, the shared pages'
//! file descriptors riding on the attach reply as SCM_RIGHTS.

use std::ffi::c_int;

/// Longest request line the arbiter reads; longer ones are refused.
pub const MAX_LINE: usize = 64 * 1024;

pub fn connect(path: &str) -> Result<c_int, String> {
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    if path.len() >= addr.sun_path.len() {
        return Err(format!("{path}: socket path too long"));
    }
    for (d, s) in addr.sun_path.iter_mut().zip(path.bytes()) {
        *d = s as libc::c_char;
    }
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(format!("socket: {}", std::io::Error::last_os_error()));
        }
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        if libc::connect(fd, &addr as *const _ as *const libc::sockaddr, len) != 0 {
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            return Err(format!("{path}: cannot reach the arbiter: {e}"));
        }
        Ok(fd)
    }
}

/// Sends one request line and reads its one reply line (with any file descriptors sent along).
pub fn call(fd: c_int, doc: &serde_json::Value, want_fds: bool) -> Result<(serde_json::Value, Vec<c_int>), String> {
    let mut line = doc.to_string();
    line.push('\n');
    let mut sent = 0;
    while sent < line.len() {
        let n = unsafe { libc::send(fd, line[sent..].as_ptr() as *const _, line.len() - sent, libc::MSG_NOSIGNAL) };
        if n <= 0 {
            return Err(format!("arbiter: send: {}", std::io::Error::last_os_error()));
        }
        sent += n as usize;
    }
    let mut reply = Vec::new();
    let mut fds = Vec::new();
    let mut buf = [0u8; 4096];
    while !reply.ends_with(b"\n") {
        let n = recv_with_fds(fd, &mut buf, if want_fds { Some(&mut fds) } else { None })?;
        if n == 0 {
            return Err("arbiter closed the connection".into());
        }
        reply.extend_from_slice(&buf[..n]);
    }
    let text = std::str::from_utf8(&reply).map_err(|_| "arbiter: reply is not UTF-8".to_string())?;
    let value = serde_json::from_str(text.trim_end()).map_err(|e| format!("arbiter: bad reply: {e}"))?;
    Ok((value, fds))
}

fn recv_with_fds(fd: c_int, buf: &mut [u8], mut fds: Option<&mut Vec<c_int>>) -> Result<usize, String> {
    let mut control = [0u64; 8];
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr() as *mut _, iov_len: buf.len() };
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut _;
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    let n = loop {
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break n;
        }
    };
    if n < 0 {
        return Err(format!("arbiter: recv: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: walking the control buffer the kernel just filled, with the kernel's own macros.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<c_int>();
                let data = libc::CMSG_DATA(cmsg) as *const c_int;
                for i in 0..count {
                    let received = std::ptr::read_unaligned(data.add(i));
                    match fds.as_deref_mut() {
                        Some(kept) => kept.push(received),
                        None => {
                            libc::close(received);
                        }
                    }
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok(n as usize)
}

/// Sends `line` with file descriptors attached (SCM_RIGHTS), without blocking.
pub fn send_with_fds(fd: c_int, line: &[u8], fds: &[c_int]) -> std::io::Result<usize> {
    let mut control = [0u64; 8];
    let mut iov = libc::iovec { iov_base: line.as_ptr() as *mut _, iov_len: line.len() };
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    let payload = std::mem::size_of_val(fds) as u32;
    // SAFETY: the control buffer holds one SCM_RIGHTS header for up to 8 descriptors.
    unsafe {
        msg.msg_control = control.as_mut_ptr() as *mut _;
        msg.msg_controllen = libc::CMSG_SPACE(payload) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(payload) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg) as *mut c_int, fds.len());
        let n = libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT);
        if n < 0 { Err(std::io::Error::last_os_error()) } else { Ok(n as usize) }
    }
}
