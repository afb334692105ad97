//! A small client of the kernel's `mptcp_pm` generic-netlink family (uapi
//! `linux/mptcp_pm.h`, spec `Documentation/netlink/specs/mptcp_pm.yaml`), built on the
//! rust-netlink crates (`netlink-sys` sockets, `netlink-packet-core`/`-generic` framing).
//! nena uses it as the userspace path manager of its own connections
//! (`MPTCP_PM_CMD_SUBFLOW_CREATE`, `MPTCP_PM_CMD_SET_FLAGS`), to list in-kernel PM
//! endpoints (`MPTCP_PM_CMD_GET_ADDR`) for diagnostics, and to watch subflows come and go
//! (`mptcp_pm_events`). A socket belongs to the network namespace of the thread that opens
//! it.
//!
//! * `attrs`: the message model (numbers, attributes, encoding, endpoints), no I/O;
//! * `commands`: [`PmSocket`], requests and their answers;
//! * `events`: [`PmEvents`], the event subscription, and [`PmEvent`].

mod attrs;
mod commands;
mod events;

pub use attrs::{
    addr_nest, AddrAttr, Endpoint, PmAttr, PmMessage, MPTCP_PM_ADDR_FLAG_BACKUP,
    MPTCP_PM_ADDR_FLAG_FULLMESH, MPTCP_PM_ADDR_FLAG_SIGNAL, MPTCP_PM_ADDR_FLAG_SUBFLOW,
    MPTCP_PM_CMD_ADD_ADDR, MPTCP_PM_CMD_DEL_ADDR, MPTCP_PM_CMD_GET_ADDR, MPTCP_PM_CMD_REMOVE,
    MPTCP_PM_CMD_SET_FLAGS, MPTCP_PM_CMD_SUBFLOW_CREATE, MPTCP_PM_CMD_SUBFLOW_DESTROY,
    MPTCP_PM_NAME, MPTCP_PM_VER,
};
pub use commands::{local_id, PmError, PmSocket};
pub use events::{
    PmEvent, PmEvents, MPTCP_EVENT_ANNOUNCED, MPTCP_EVENT_CLOSED, MPTCP_EVENT_CREATED,
    MPTCP_EVENT_ESTABLISHED, MPTCP_EVENT_SUB_CLOSED, MPTCP_EVENT_SUB_ESTABLISHED,
    MPTCP_EVENT_SUB_PRIORITY, MPTCP_PM_EV_FLAG_DENY_JOIN_ID0, MPTCP_PM_EV_GRP_NAME,
};
