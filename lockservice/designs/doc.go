// Package designs lists the built-in lock designs (BuiltinDesigns): the
// replicated reference, single-node, lease-only and Redlock. It imports
// their packages, which the contract must not.
package designs
