//! Interest decided once per callsite.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use tracing::Metadata;

use super::rules::*;

/// A lock-free map from callsite (its metadata's address) to whether the layer wants it and,
/// if so, its [`CallsiteInfo`]: written under a mutex when a callsite is first seen (rare),
/// read with atomic loads on every span.
///
/// Every callsite the layer sees is classified here, not only the ones registered: a thread
/// may create a span while another thread is still registering its callsite (tracing then
/// answers "sometimes" and asks the subscriber), and such a span must not be taken for one
/// the layer does not want.
#[derive(Debug)]
pub(crate) struct CallsiteSet {
    /// The address, with the low bit set for a callsite the layer does not want (metadata
    /// is aligned, so the bit is free).
    pub(crate) slots: Box<[AtomicUsize]>,
    pub(crate) infos: Box<[OnceLock<CallsiteInfo>]>,
    pub(crate) insert: Mutex<()>,
}

/// What the callsite set knows of a callsite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Known {
    /// Wanted; its info is at this index.
    Wanted(u32),
    /// Not wanted.
    Unwanted,
    /// Not classified yet (or the set is full).
    Missing,
}

impl CallsiteSet {
    pub(crate) const CAP: usize = 4096;
    pub(crate) const UNWANTED: usize = 1;

    pub fn new() -> Self {
        CallsiteSet {
            slots: (0..Self::CAP).map(|_| AtomicUsize::new(0)).collect(),
            infos: (0..Self::CAP).map(|_| OnceLock::new()).collect(),
            insert: Mutex::new(()),
        }
    }

    pub(crate) fn start(addr: usize) -> usize {
        ((addr as u64 >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize % Self::CAP
    }

    pub(crate) fn decode(slot: usize, at: usize) -> Known {
        if slot & Self::UNWANTED == 0 {
            Known::Wanted(at as u32)
        } else {
            Known::Unwanted
        }
    }

    pub(crate) fn find(&self, meta: &Metadata<'_>) -> Known {
        let addr = std::ptr::from_ref(meta) as usize;
        let start = Self::start(addr);
        for i in 0..Self::CAP {
            let at = (start + i) % Self::CAP;
            match self.slots[at].load(Ordering::Acquire) {
                0 => break,
                a if a & !Self::UNWANTED == addr => return Self::decode(a, at),
                _ => {}
            }
        }
        Known::Missing
    }

    /// Classifies a callsite once, by the layer's settings; `Missing` only when the set is
    /// full (the caller then classifies it at each span, the slow way).
    pub(crate) fn classify(&self, meta: &'static Metadata<'static>, cfg: &LayerConfig) -> Known {
        let addr = std::ptr::from_ref(meta) as usize;
        let _g = self
            .insert
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let start = Self::start(addr);
        for i in 0..Self::CAP {
            let at = (start + i) % Self::CAP;
            let slot = &self.slots[at];
            match slot.load(Ordering::Acquire) {
                0 => {
                    let wanted = cfg.interesting(meta);
                    if wanted {
                        // the info first: whoever sees the address sees its info
                        let _ = self.infos[at].set(cfg.info(meta));
                    }
                    let tagged = if wanted { addr } else { addr | Self::UNWANTED };
                    slot.store(tagged, Ordering::Release);
                    return Self::decode(tagged, at);
                }
                a if a & !Self::UNWANTED == addr => return Self::decode(a, at),
                _ => {}
            }
        }
        Known::Missing
    }

    pub(crate) fn info(&self, at: u32) -> Option<&CallsiteInfo> {
        self.infos.get(at as usize)?.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::FieldNames;
    use crate::fields::{Slot, Slots};
    use proofline_core::EventKind;

    /// A span can be created while its callsite is still being registered on another
    /// thread: a callsite the set has never seen is classified then, not taken as unwanted.
    #[test]
    pub(crate) fn a_callsite_never_registered_is_classified_not_ignored() {
        let cfg = LayerConfig {
            rules: vec![
                SpanRule::new("gpu_prove", EventKind::GpuStart, crate::Edge::FirstEnter),
                SpanRule::new("gpu_prove", EventKind::GpuEnd, crate::Edge::Close),
            ],
            whole: Vec::new(),
            fields: FieldNames::default(),
            event_target: "timeline".into(),
            gpu_queue_on_synth_end: true,
        };
        let set = CallsiteSet::new();
        let (prove, other) =
            tracing::subscriber::with_default(tracing_subscriber::registry(), || {
                let prove = tracing::info_span!("gpu_prove", circuit = "x", partition = 1);
                let other = tracing::info_span!("deserialize_c1", bytes = 1);
                (
                    prove.metadata().expect("a callsite"),
                    other.metadata().expect("a callsite"),
                )
            });
        assert_eq!(set.find(prove), Known::Missing);
        let Known::Wanted(at) = set.classify(prove, &cfg) else {
            panic!("gpu_prove is mapped");
        };
        assert_eq!(set.find(prove), Known::Wanted(at));
        let info = set.info(at).expect("its info");
        assert_eq!(
            info.rules,
            [
                0,
                1 << EventKind::GpuStart.index(),
                1 << EventKind::GpuEnd.index()
            ]
        );
        assert_eq!(
            &*info.slots,
            &[Slots::default(), Slots::from(Slot::Partition)]
        );
        assert_eq!(set.find(other), Known::Missing);
        assert_eq!(set.classify(other, &cfg), Known::Unwanted);
        assert_eq!(set.find(other), Known::Unwanted);
        assert_eq!(
            set.find(prove),
            Known::Wanted(at),
            "{other:?} did not disturb it"
        );
    }
}
