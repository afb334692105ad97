//! nena-codec: the papers' byte scrambling (being written).
