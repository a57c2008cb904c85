// Package record is the on-disk form shared by the lock service's
// processes: records sealed with their length and CRC-32C, a record kept
// in two slots so a torn overwrite leaves the previous copy, and the
// reader of their varint-and-bytes encoding.
package record
