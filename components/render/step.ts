// The shape of one step a layer's plan hands its component: the scripts the component gives
// NodeHost.command, rendered and ready.

/** A step's scripts: create (as root), delete, and the read-back a refresh runs. */
export interface StepScripts {
    create: string;
    delete: string;
    read: string;
}
