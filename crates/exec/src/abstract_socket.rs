//! The launcher's listening sockets: AF_UNIX sockets bound to an abstract name ("\0NAME", no
//! file left behind), which the program's runtime finds by the launcher's pid (the memory
//! supervisor's "coreplane-grow-PID", the signal notes' "coreplane-signals-PID").

use std::os::fd::RawFd;

/// A socket of `kind` (SOCK_* with its flags) bound to the abstract name `name`.
pub fn bind(kind: libc::c_int, name: &str) -> std::io::Result<RawFd> {
    let fd = unsafe { libc::socket(libc::AF_UNIX, kind, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    // The launcher's names are a word and a pid: far below sun_path's 108 bytes.
    for (i, b) in name.bytes().enumerate() {
        addr.sun_path[i + 1] = b as libc::c_char;
    }
    let len = (std::mem::size_of::<libc::sa_family_t>() + 1 + name.len()) as libc::socklen_t;
    if unsafe { libc::bind(fd, &addr as *const libc::sockaddr_un as *const libc::sockaddr, len) } != 0 {
        let e = std::io::Error::last_os_error();
        unsafe { libc::close(fd) };
        return Err(e);
    }
    Ok(fd)
}
