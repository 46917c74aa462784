package comm

// ProfileCompiledIn tells the external tests whether the comms logger's
// hook is compiled in (it is not with -tags gocomm_noprofile).
const ProfileCompiledIn = profileHook
