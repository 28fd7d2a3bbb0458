package pickle

// This file names the keys of a snapshot's dicts by what they mean (a
// role), so that what a dict is (shapeOf) and what a trace entry holds
// (event) are told by a switch on a byte instead of on the key's text.
// The fast path of a trace entry finds a key's role by its text number in
// the memo (roleCache) without making the key's string.

// keyRole is what a key of a snapshot dict means: a trace entry's field,
// or a key that tells a dict's shape. roleOther is any other key.
type keyRole uint8

const (
	roleOther keyRole = iota
	roleAction
	roleAddr
	roleSize
	roleStream
	roleDeviceFree
	roleTimeUS
	roleFrames
	roleCompileContext
	roleUserMetadata
	roleInternalMetadata
	rolePoolID // pool_id or segment_pool_id
	roleCppFrames
	roleFilename
	roleName
	roleLine
	roleState
	roleBlocks
	roleTotalSize
	roleStage
	nRoles
)

// roleOf is the role of the key with text key.
func roleOf(key string) keyRole {
	switch key {
	case "action":
		return roleAction
	case "addr":
		return roleAddr
	case "size":
		return roleSize
	case "stream":
		return roleStream
	case "device_free":
		return roleDeviceFree
	case "time_us":
		return roleTimeUS
	case "frames":
		return roleFrames
	case "compile_context":
		return roleCompileContext
	case "user_metadata":
		return roleUserMetadata
	case "internal_metadata":
		return roleInternalMetadata
	case "pool_id", "segment_pool_id":
		return rolePoolID
	case "cpp_frames":
		return roleCppFrames
	case "filename":
		return roleFilename
	case "name":
		return roleName
	case "line":
		return roleLine
	case "state":
		return roleState
	case "blocks":
		return roleBlocks
	case "total_size":
		return roleTotalSize
	case "stage":
		return roleStage
	}
	return roleOther
}

// entryField says that eventKey reads a key of role r into the event
// (it names the key of any other role: an unknown key of a trace entry).
func (r keyRole) entryField() bool { return r >= roleAction && r <= roleCppFrames }

// roleSet is a set of roles, one bit each.
type roleSet uint32

func (s roleSet) has(r keyRole) bool { return s&(1<<r) != 0 }

// shapeOfRoles tells a dict's shape by the roles of its keys: a frame has
// filename (or name and line), a trace entry action, a block state and
// size, a segment blocks or total_size, an annotation stage and name.
func shapeOfRoles(s roleSet) dictShape {
	switch {
	case s.has(roleFilename) || (s.has(roleName) && s.has(roleLine)):
		return shapeFrame
	case s.has(roleAction):
		return shapeEntry
	case s.has(roleState) && s.has(roleSize):
		return shapeBlock
	case s.has(roleBlocks) || s.has(roleTotalSize):
		return shapeSegment
	case s.has(roleStage) && s.has(roleName):
		return shapeAnnotation
	}
	return shapeOther
}

// maxCachedRoles bounds the texts whose roles roleCache keeps (a byte
// each): a snapshot's keys are among its first texts; a text past them has
// its role found from its string each time.
const maxCachedRoles = 1 << 16

// roleCache keeps the role of each text of the memo's shortTexts that was
// a key, by the text's number (texts are never renumbered).
type roleCache struct {
	role []keyRole // role + 1 by text number, 0 when not yet found
}

// of returns the role of text number i of texts.
func (c *roleCache) of(texts *shortTexts, i uint32) keyRole {
	if i >= maxCachedRoles {
		return roleOf(texts.at(i))
	}
	if int(i) < len(c.role) {
		if r := c.role[i]; r > 0 {
			return r - 1
		}
	} else {
		c.role = append(c.role, make([]keyRole, int(i)+1-len(c.role))...)
	}
	r := roleOf(texts.at(i))
	c.role[i] = r + 1
	return r
}
