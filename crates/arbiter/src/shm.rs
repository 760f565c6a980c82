//! The shared pages of one many-core process, as sealed memfds: procinfo sealed against any
//! later writable mapping (the program can only read it) and both against resizing (a program
//! that truncates them cannot make the arbiter fault).

use coreplane_vcore::layout::{ProcData, ProcInfo, PROCDATA_SIZE, PROCINFO_SIZE};
use std::ffi::{c_int, CStr};

const F_SEAL_FUTURE_WRITE: c_int = 0x0010;

pub struct Pages {
    pub info_fd: c_int,
    pub data_fd: c_int,
    info: *mut ProcInfo,
    data: *mut ProcData,
}

fn memfd(name: &CStr, size: usize) -> Result<(c_int, *mut libc::c_void), String> {
    // SAFETY: plain syscalls on a descriptor we own; the mapping is sized to the file.
    unsafe {
        let fd = libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING);
        if fd < 0 || libc::ftruncate(fd, size as libc::off_t) != 0 {
            return Err(format!("memfd: {}", std::io::Error::last_os_error()));
        }
        let p = libc::mmap(std::ptr::null_mut(), size, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0);
        if p == libc::MAP_FAILED {
            return Err(format!("mmap: {}", std::io::Error::last_os_error()));
        }
        Ok((fd, p))
    }
}

fn seal(fd: c_int, seals: c_int) -> Result<(), String> {
    if unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, seals) } != 0 {
        return Err(format!("memfd seals: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

impl Pages {
    pub fn new() -> Result<Pages, String> {
        let (info_fd, info) = memfd(c"coreplane-procinfo", PROCINFO_SIZE)?;
        let (data_fd, data) = memfd(c"coreplane-procdata", PROCDATA_SIZE)?;
        let size_seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
        seal(info_fd, size_seals | F_SEAL_FUTURE_WRITE | libc::F_SEAL_SEAL)?;
        seal(data_fd, size_seals | libc::F_SEAL_SEAL)?;
        Ok(Pages { info_fd, data_fd, info: info as *mut ProcInfo, data: data as *mut ProcData })
    }

    pub fn info(&self) -> &ProcInfo {
        // SAFETY: mapped for the life of self; every field is atomic or written once.
        unsafe { &*self.info }
    }

    pub fn data(&self) -> &ProcData {
        // SAFETY: as above; the program may scribble on it, which only the queues' indices read.
        unsafe { &*self.data }
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        unsafe {
            libc::munmap(self.info as *mut _, PROCINFO_SIZE);
            libc::munmap(self.data as *mut _, PROCDATA_SIZE);
            libc::close(self.info_fd);
            libc::close(self.data_fd);
        }
    }
}
